import { describe, expect, it } from 'vitest';
import { parseInput } from '../http/validate.js';
import { CreateTriggerBody, isTriggerId, UpdateTriggerBody } from './input.js';

const gmail = { automationId: 'a_1', toolkit: 'gmail', triggerSlug: 'GMAIL_NEW_GMAIL_MESSAGE', connectedAccountId: 'ca_1' };
const github = { automationId: 'a_2', toolkit: 'github', triggerSlug: 'GITHUB_COMMIT_EVENT', connectedAccountId: 'ca_2' };

function refusal(body: unknown): string {
  try {
    parseInput(CreateTriggerBody, body, 'body');
  } catch (error) {
    expect(error).toMatchObject({ status: 400, code: 'invalid_request' });
    return (error as Error).message;
  }
  throw new Error('the body was accepted');
}

describe('CreateTriggerBody', () => {
  it('fills filter, config and enabled', () => {
    expect(parseInput(CreateTriggerBody, gmail, 'body')).toEqual({ ...gmail, filter: {}, config: {}, enabled: true });
  });

  it('accepts every Gmail filter key and dot paths for other apps', () => {
    const filter = { from: 'ada@example.com', subject: 'Hi', label: 'Work', words: 'invoice' };
    expect(parseInput(CreateTriggerBody, { ...gmail, filter }, 'body').filter).toEqual(filter);
    const paths = { 'sender.login': 'octocat', 'commits.0.message': 'fix', author: 'ada' };
    expect(parseInput(CreateTriggerBody, { ...github, filter: paths }, 'body').filter).toEqual(paths);
  });

  // Wrong types are checked by field name only: how the sentence words them is the shared validator's.
  it.each([
    ['an unknown field', { ...gmail, extra: 1 }, 'body: unknown field extra'],
    ['no automationId', { ...gmail, automationId: undefined }, 'body.automationId: is required'],
    ['an empty automationId', { ...gmail, automationId: '' }, 'body.automationId: must not be empty'],
    ['a long automationId', { ...gmail, automationId: 'x'.repeat(129) }, 'body.automationId: must be at most 128 characters'],
    ['a control character in automationId', { ...gmail, automationId: 'a\nb' }, 'body.automationId: must be printable characters'],
    ['a numeric automationId', { ...gmail, automationId: 7 }, 'body.automationId: '],
    ['an upper-case toolkit', { ...gmail, toolkit: 'Gmail' }, 'body.toolkit: must be a toolkit slug such as gmail'],
    [
      'a lower-case trigger slug',
      { ...gmail, triggerSlug: 'gmail_new_gmail_message' },
      'body.triggerSlug: must be a trigger type in upper snake case',
    ],
    ['a path as account id', { ...gmail, connectedAccountId: '../ca_1' }, 'body.connectedAccountId: must be a connected account id'],
    ['a string enabled', { ...gmail, enabled: 'yes' }, 'body.enabled: '],
    ['a list as filter', { ...gmail, filter: [] }, 'body.filter: '],
    ['a number in the filter', { ...gmail, filter: { from: 7 } }, 'body.filter.from: '],
    ['an unknown Gmail key', { ...gmail, filter: { to: 'x' } }, 'body.filter.to: is not a Gmail filter; use from, subject, label, words'],
    ['an empty Gmail value', { ...gmail, filter: { from: '' } }, 'body.filter.from: must contain a letter, digit or symbol'],
    ['a whitespace Gmail value', { ...gmail, filter: { subject: '   ' } }, 'body.filter.subject: must contain a letter, digit or symbol'],
    ['punctuation-only words', { ...gmail, filter: { words: '" \\ ( )' } }, 'body.filter.words: must contain a letter, digit or symbol'],
    ['a punctuation-only label', { ...gmail, filter: { label: '/-/' } }, 'body.filter.label: must contain a letter, digit or symbol'],
    ['a 257-character value', { ...gmail, filter: { subject: 'x'.repeat(257) } }, 'body.filter.subject: must be at most 256 characters'],
    ['a raw Gmail query', { ...gmail, config: { query: 'from:anyone' } }, 'body.config.query: is set by the broker'],
    ['a string config', { ...gmail, config: 'x' }, 'body.config: '],
    ['a config over 8 KB', { ...gmail, config: { blob: 'x'.repeat(8200) } }, 'body.config: must be at most 8192 bytes of JSON'],
    ['an empty path segment', { ...github, filter: { 'sender..login': 'x' } }, 'body.filter.sender..login: must be a dot path'],
    ['a space in a path', { ...github, filter: { 'a b': 'x' } }, 'body.filter.a b: must be a dot path'],
    ['a blank value for a path', { ...github, filter: { 'sender.login': ' ' } }, 'body.filter.sender.login: must not be empty'],
    [
      '21 filter keys',
      { ...github, filter: Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`k${i}`, 'v'])) },
      'body.filter: must have at most 20 keys',
    ],
  ])('refuses %s', (_what, body, message) => {
    expect(refusal(body)).toContain(message);
  });

  it('allows config.query for apps other than Gmail', () => {
    expect(parseInput(CreateTriggerBody, { ...github, config: { query: 'x' } }, 'body').config).toEqual({ query: 'x' });
  });

  it('accepts a config of exactly 8 KB', () => {
    const blob = 'x'.repeat(8192 - JSON.stringify({ blob: '' }).length);
    expect(parseInput(CreateTriggerBody, { ...gmail, config: { blob } }, 'body').config).toEqual({ blob });
  });
});

describe('UpdateTriggerBody', () => {
  it('takes a boolean enabled, an account id to move to, or both, and nothing else', () => {
    expect(parseInput(UpdateTriggerBody, { enabled: false }, 'body')).toEqual({ enabled: false });
    expect(parseInput(UpdateTriggerBody, { connectedAccountId: 'ca_new' }, 'body')).toEqual({ connectedAccountId: 'ca_new' });
    expect(parseInput(UpdateTriggerBody, { connectedAccountId: 'ca_new', enabled: true }, 'body')).toEqual({
      connectedAccountId: 'ca_new',
      enabled: true,
    });
    expect(() => parseInput(UpdateTriggerBody, {}, 'body')).toThrow('give enabled, connectedAccountId, or both');
    expect(() => parseInput(UpdateTriggerBody, { connectedAccountId: '../x' }, 'body')).toThrow('body.connectedAccountId: ');
    expect(() => parseInput(UpdateTriggerBody, { enabled: 1 }, 'body')).toThrow('body.enabled: ');
    expect(() => parseInput(UpdateTriggerBody, { enabled: true, name: 'x' }, 'body')).toThrow('body: unknown field name');
  });
});

describe('isTriggerId', () => {
  it('accepts UUIDs only', () => {
    expect(isTriggerId('6f1c1e0a-4b7a-4c36-9d0e-0d6c7f1e2a3b')).toBe(true);
    expect(isTriggerId('6F1C1E0A-4B7A-4C36-9D0E-0D6C7F1E2A3B')).toBe(true);
    for (const id of ['', '1', 'ti_abc', '6f1c1e0a4b7a4c369d0e0d6c7f1e2a3b', "6f1c1e0a-4b7a-4c36-9d0e-0d6c7f1e2a3b' or 1=1"]) {
      expect(isTriggerId(id)).toBe(false);
    }
  });
});
