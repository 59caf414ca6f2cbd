import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../../support/database.js';

/**
 * Whether a trigger message passes its trigger's filter is decided in the database alone
 * (migrations/functions/omb_trigger_filter_matches.sql), for both ingest paths.
 */
let database: TestDatabase;
beforeAll(async () => {
  database = await createTestDatabase();
});
afterAll(() => database.drop());

async function matchesFilter(toolkit: string, filter: Record<string, string>, data: unknown): Promise<boolean> {
  const [row] = await database.sql<{ matches: boolean }[]>`
    select omb_trigger_filter_matches(${toolkit}, ${JSON.stringify(filter)}::text::jsonb, ${JSON.stringify(data)}::text::jsonb) as matches`;
  return row!.matches;
}

const issue = {
  action: 'opened',
  issue: { title: 'Crash on START', number: 42, labels: [{ name: 'bug' }, { name: 'P1' }], draft: false },
  sender: { login: 'Octocat' },
  tags: ['Alpha', 'beta'],
};

describe('a trigger filter', () => {
  it('lets every Gmail event through: Gmail applied the filter as a search query', async () => {
    expect(await matchesFilter('gmail', { from: 'nobody@example.com' }, { from: 'someone@else.org' })).toBe(true);
    expect(await matchesFilter('GMAIL', { subject: 'x' }, null)).toBe(true);
  });

  it('matches everything with an empty filter', async () => {
    expect(await matchesFilter('github', {}, issue)).toBe(true);
    expect(await matchesFilter('github', {}, null)).toBe(true);
  });

  it('matches a substring at a dot path, ignoring case', async () => {
    expect(await matchesFilter('github', { 'issue.title': 'crash' }, issue)).toBe(true);
    expect(await matchesFilter('github', { 'issue.title': 'ON start' }, issue)).toBe(true);
    expect(await matchesFilter('github', { 'sender.login': 'OCTO' }, issue)).toBe(true);
    expect(await matchesFilter('github', { 'issue.title': 'hang' }, issue)).toBe(false);
  });

  it('requires every key to match', async () => {
    expect(await matchesFilter('github', { 'issue.title': 'crash', action: 'open' }, issue)).toBe(true);
    expect(await matchesFilter('github', { 'issue.title': 'crash', action: 'closed' }, issue)).toBe(false);
  });

  it('compares numbers and booleans as text', async () => {
    expect(await matchesFilter('github', { 'issue.number': '42' }, issue)).toBe(true);
    expect(await matchesFilter('github', { 'issue.number': '4' }, issue)).toBe(true);
    expect(await matchesFilter('github', { 'issue.draft': 'false' }, issue)).toBe(true);
  });

  it('indexes lists by position and matches a list when any item does', async () => {
    expect(await matchesFilter('github', { 'issue.labels.1.name': 'p1' }, issue)).toBe(true);
    expect(await matchesFilter('github', { 'issue.labels.0.name': 'p1' }, issue)).toBe(false);
    expect(await matchesFilter('github', { tags: 'BETA' }, issue)).toBe(true);
    expect(await matchesFilter('github', { tags: 'gamma' }, issue)).toBe(false);
  });

  it('does not match a missing path, null, or a whole object', async () => {
    expect(await matchesFilter('github', { 'issue.body': 'x' }, issue)).toBe(false);
    expect(await matchesFilter('github', { 'issue.title.deeper': 'crash' }, issue)).toBe(false);
    expect(await matchesFilter('github', { issue: 'crash' }, issue)).toBe(false);
    expect(await matchesFilter('github', { x: '' }, { x: null })).toBe(false);
    expect(await matchesFilter('github', { 'a.b': 'x' }, 'a string')).toBe(false);
  });

  it('never walks into the prototype chain', async () => {
    expect(await matchesFilter('slack', { constructor: 'Object' }, {})).toBe(false);
    expect(await matchesFilter('slack', { '__proto__.toString': 'function' }, {})).toBe(false);
    expect(await matchesFilter('slack', { 'text.length': '0' }, { text: '' })).toBe(false);
  });

  it('matches an empty filter value whenever the path holds text', async () => {
    expect(await matchesFilter('slack', { text: '' }, { text: 'hello' })).toBe(true);
  });

  it('folds case beyond ASCII, and reaches items of lists within lists', async () => {
    expect(await matchesFilter('slack', { text: 'ÉTÉ' }, { text: 'un été chaud' })).toBe(true);
    expect(await matchesFilter('slack', { tags: 'deep' }, { tags: [['a', ['Deep']], 'b'] })).toBe(true);
    expect(await matchesFilter('slack', { tags: 'deep' }, { tags: [{ name: 'deep' }] })).toBe(false);
  });

  it('indexes a list only by a plain position', async () => {
    const data = { items: ['zero', 'one'] };
    expect(await matchesFilter('github', { 'items.1': 'one' }, data)).toBe(true);
    expect(await matchesFilter('github', { 'items.01': 'one' }, data)).toBe(false);
    expect(await matchesFilter('github', { 'items.-1': 'one' }, data)).toBe(false);
    expect(await matchesFilter('github', { 'items.2': 'one' }, data)).toBe(false);
    expect(await matchesFilter('github', { '': 'x' }, 'x')).toBe(false);
  });
});
