import { describe, expect, it } from 'vitest';
import { matchesFilter } from './filter.js';

const issue = {
  action: 'opened',
  issue: { title: 'Crash on START', number: 42, labels: [{ name: 'bug' }, { name: 'P1' }], draft: false },
  sender: { login: 'Octocat' },
  tags: ['Alpha', 'beta'],
};

describe('matchesFilter', () => {
  it('lets every Gmail event through: Gmail applied the filter as a search query', () => {
    expect(matchesFilter('gmail', { from: 'nobody@example.com' }, { from: 'someone@else.org' })).toBe(true);
    expect(matchesFilter('GMAIL', { subject: 'x' }, null)).toBe(true);
  });

  it('matches everything with an empty filter', () => {
    expect(matchesFilter('github', {}, issue)).toBe(true);
    expect(matchesFilter('github', {}, null)).toBe(true);
  });

  it('matches a substring at a dot path, ignoring case', () => {
    expect(matchesFilter('github', { 'issue.title': 'crash' }, issue)).toBe(true);
    expect(matchesFilter('github', { 'issue.title': 'ON start' }, issue)).toBe(true);
    expect(matchesFilter('github', { 'sender.login': 'OCTO' }, issue)).toBe(true);
    expect(matchesFilter('github', { 'issue.title': 'hang' }, issue)).toBe(false);
  });

  it('requires every key to match', () => {
    expect(matchesFilter('github', { 'issue.title': 'crash', action: 'open' }, issue)).toBe(true);
    expect(matchesFilter('github', { 'issue.title': 'crash', action: 'closed' }, issue)).toBe(false);
  });

  it('compares numbers and booleans as text', () => {
    expect(matchesFilter('github', { 'issue.number': '42' }, issue)).toBe(true);
    expect(matchesFilter('github', { 'issue.number': '4' }, issue)).toBe(true);
    expect(matchesFilter('github', { 'issue.draft': 'false' }, issue)).toBe(true);
  });

  it('indexes lists by position and matches a list when any item does', () => {
    expect(matchesFilter('github', { 'issue.labels.1.name': 'p1' }, issue)).toBe(true);
    expect(matchesFilter('github', { 'issue.labels.0.name': 'p1' }, issue)).toBe(false);
    expect(matchesFilter('github', { tags: 'BETA' }, issue)).toBe(true);
    expect(matchesFilter('github', { tags: 'gamma' }, issue)).toBe(false);
  });

  it('does not match a missing path, null, or a whole object', () => {
    expect(matchesFilter('github', { 'issue.body': 'x' }, issue)).toBe(false);
    expect(matchesFilter('github', { 'issue.title.deeper': 'crash' }, issue)).toBe(false);
    expect(matchesFilter('github', { issue: 'crash' }, issue)).toBe(false);
    expect(matchesFilter('github', { x: '' }, { x: null })).toBe(false);
    expect(matchesFilter('github', { 'a.b': 'x' }, 'a string')).toBe(false);
  });

  it('never walks into the prototype chain', () => {
    expect(matchesFilter('slack', { constructor: 'Object' }, {})).toBe(false);
    expect(matchesFilter('slack', { '__proto__.toString': 'function' }, {})).toBe(false);
    expect(matchesFilter('slack', { 'text.length': '0' }, { text: '' })).toBe(false);
  });

  it('matches an empty filter value whenever the path holds text', () => {
    expect(matchesFilter('slack', { text: '' }, { text: 'hello' })).toBe(true);
  });
});
