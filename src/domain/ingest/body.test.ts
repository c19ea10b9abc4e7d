import { describe, expect, it } from 'vitest';
import { tooDeepMessage } from '../json-depth.ts';
import { bodyIsStoredPayload, decodeDelivery, formPayload, mediaType, noTodoReason } from './body.ts';
import { formBody, githubPing, giteaPush, giteaTestPush } from './fixtures.testkit.ts';

const FORM = 'application/x-www-form-urlencoded';
const buf = (s: string) => Buffer.from(s, 'utf8');

describe('mediaType', () => {
  it('lower-cases and drops parameters; none is the empty string', () => {
    expect(mediaType({ 'content-type': 'Application/JSON; charset=utf-8' })).toBe('application/json');
    expect(mediaType({ 'content-type': ['application/x-www-form-urlencoded', 'text/plain'] })).toBe(FORM);
    expect(mediaType({})).toBe('');
  });
});

describe('formPayload', () => {
  it('URL-decodes the one payload field (+ is a space, %XX bytes of UTF-8)', () => {
    const json = JSON.stringify({ title: 'Füße & "quotes" + more', n: 1 });
    expect(formPayload(buf(formBody(json)))).toBe(json);
    expect(formPayload(buf('payload=%7B%22a%22%3A+%22b%22%7D'))).toBe('{"a": "b"}');
  });

  it('is null with no payload field, or with two', () => {
    expect(formPayload(buf('foo=bar'))).toBeNull();
    expect(formPayload(buf(''))).toBeNull();
    expect(formPayload(buf('{"payload":1}'))).toBeNull();
    expect(formPayload(buf('payload=1&payload=2'))).toBeNull();
  });
});

describe('decodeDelivery', () => {
  it('GitHub and Gitea form bodies: the payload field is the JSON, refusals name payload', () => {
    for (const source of ['github', 'gitea'] as const) {
      expect(decodeDelivery(source, FORM, buf('ignored'), '{"a":1}')).toEqual({ ok: true, payload: { a: 1 } });
      expect(decodeDelivery(source, FORM, buf('foo=bar'), null)).toMatchObject({ ok: false, field: 'payload', message: expect.stringMatching(/^payload: .*`payload` field/) });
      expect(decodeDelivery(source, FORM, buf('payload=%7Bnot'), '{not')).toEqual({ ok: false, field: 'payload', message: 'payload: is not valid JSON' });
      expect(decodeDelivery(source, FORM, buf('payload='), '')).toMatchObject({ ok: false, field: 'payload', message: expect.stringMatching(/^payload: is empty/) });
      expect(decodeDelivery(source, FORM, buf('x'), '['.repeat(65) + ']'.repeat(65))).toEqual({ ok: false, field: 'payload', message: `payload: ${tooDeepMessage}` });
    }
  });

  it('otherwise the body is the JSON, whatever the content type; empty and non-JSON bodies are refused naming body', () => {
    for (const source of ['github', 'gitea', 'generic'] as const) {
      for (const type of ['application/json', 'text/plain', '']) {
        expect(decodeDelivery(source, type, buf('{"a":1}'), null)).toEqual({ ok: true, payload: { a: 1 } });
      }
      expect(decodeDelivery(source, 'application/json', buf(''), null)).toMatchObject({ ok: false, field: 'body', message: expect.stringMatching(/^body: is empty/) });
      expect(decodeDelivery(source, 'application/json', buf(' \r\n'), null)).toMatchObject({ ok: false, field: 'body' });
      expect(decodeDelivery(source, 'text/plain', buf('disk 93% full'), null)).toEqual({ ok: false, field: 'body', message: 'body: is not valid JSON' });
    }
  });

  it('a generic webhook never unwraps a form: `payload=` is just text that is not JSON', () => {
    expect(decodeDelivery('generic', FORM, buf(formBody('{"a":1}')), null)).toEqual({ ok: false, field: 'body', message: 'body: is not valid JSON' });
    expect(decodeDelivery('generic', FORM, buf('{"a":1}'), null)).toEqual({ ok: true, payload: { a: 1 } });
  });
});

describe('bodyIsStoredPayload', () => {
  it('a UTF-8 JSON body that is not a form is stored as read, whatever its content type', () => {
    for (const type of ['application/json', 'text/plain', '']) expect(bodyIsStoredPayload('github', type, buf('{"n":12345678901234567890,"r":1.10,"t":"café"}'))).toBe(true);
    expect(bodyIsStoredPayload('generic', FORM, buf('{"a":1}'))).toBe(true);
  });

  it('a form, bytes that are not UTF-8, or a number in exponent form go through the parse', () => {
    expect(bodyIsStoredPayload('github', FORM, buf(formBody('{"a":1}')))).toBe(false);
    expect(bodyIsStoredPayload('generic', 'application/json', Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xe9, 0x22, 0x7d]))).toBe(false);
    for (const n of ['1e5', '1E+2', '2.5e-3', '1.e9', '-7e131071']) expect(bodyIsStoredPayload('generic', 'application/json', buf(`{"x":${n}}`)), n).toBe(false);
    // Letters that only look like an exponent, with no digit around them, keep the fast path.
    expect(bodyIsStoredPayload('generic', 'application/json', buf('{"e":"eel","E2":"x"}'))).toBe(true);
  });
});

describe('noTodoReason', () => {
  it("GitHub's ping is recorded, not worked; nowhere else is ping special", () => {
    expect(noTodoReason('github', 'ping', githubPing)).toBe('ping');
    expect(noTodoReason('gitea', 'ping', githubPing)).toBeNull();
    expect(noTodoReason('generic', 'ping', {})).toBeNull();
    expect(noTodoReason('github', 'issues', githubPing)).toBeNull();
  });

  it("Gitea's test delivery (before = after = the zero id) is recorded; real pushes are work", () => {
    expect(noTodoReason('gitea', 'push', giteaTestPush)).toBe('test_delivery');
    expect(noTodoReason('gitea', 'push', { ...giteaTestPush, before: '0'.repeat(64), after: '0'.repeat(64) })).toBe('test_delivery');
    expect(noTodoReason('gitea', 'push', giteaPush)).toBeNull();
    expect(noTodoReason('gitea', 'push', { ...giteaPush, before: '0'.repeat(40) })).toBeNull(); // a new branch
    expect(noTodoReason('gitea', 'push', { ...giteaPush, after: '0'.repeat(40) })).toBeNull(); // a deleted branch
    expect(noTodoReason('github', 'push', giteaTestPush)).toBeNull();
    expect(noTodoReason('gitea', 'issues', giteaTestPush)).toBeNull();
    expect(noTodoReason('gitea', 'push', [giteaTestPush])).toBeNull();
    expect(noTodoReason('gitea', 'push', null)).toBeNull();
  });
});
