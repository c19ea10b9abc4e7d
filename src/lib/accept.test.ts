import { describe, expect, it } from 'vitest';
import { prefersJson } from '../server.ts';
import { isAcceptable, parseAccept, preferredType, rate } from './accept.ts';

describe('parseAccept', () => {
  it('reads ranges, wildcards and q-values, lower-casing and skipping what is no media range', () => {
    expect(parseAccept('Application/JSON;Q=0.5, text/*;charset=utf-8, */*;q=0, */json, junk, ;q=1, text/plain;q=2, a/b;q=abc, c/d;q=0.123')).toEqual([
      { type: 'application', subtype: 'json', q: 0.5 },
      { type: 'text', subtype: '*', q: 1 },
      { type: '*', subtype: '*', q: 0 },
      { type: 'text', subtype: 'plain', q: 0 },
      { type: 'a', subtype: 'b', q: 0 },
      { type: 'c', subtype: 'd', q: 0.123 },
    ]);
    expect(parseAccept(undefined)).toEqual([]);
    expect(parseAccept('')).toEqual([]);
  });
});

describe('rate', () => {
  it('the most specific matching range decides, whatever its q', () => {
    const ranges = parseAccept('*/*;q=0.8, text/*;q=0.5, text/plain;q=0, application/json');
    expect(rate(ranges, 'text/plain')).toEqual({ q: 0, specificity: 2 });
    expect(rate(ranges, 'text/html')).toEqual({ q: 0.5, specificity: 1 });
    expect(rate(ranges, 'image/png')).toEqual({ q: 0.8, specificity: 0 });
    expect(rate(ranges, 'Application/Json')).toEqual({ q: 1, specificity: 2 });
    expect(rate(parseAccept('text/plain'), 'application/json')).toEqual({ q: 0, specificity: -1 });
  });
});

describe('isAcceptable (the MCP transport: each of application/json and text/event-stream)', () => {
  it('takes a type named exactly or by a wildcard with q above 0', () => {
    for (const h of ['application/json, text/event-stream', 'application/json;q=0.9, text/event-stream;q=0.8', '*/*', 'application/*, text/*', ' APPLICATION/JSON , Text/Event-Stream ']) {
      expect(isAcceptable(h, 'application/json'), h).toBe(true);
      expect(isAcceptable(h, 'text/event-stream'), h).toBe(true);
    }
  });

  it('refuses a type not named, named with q=0, or no header at all', () => {
    expect(isAcceptable('application/json', 'text/event-stream')).toBe(false);
    expect(isAcceptable('text/event-stream', 'application/json')).toBe(false);
    expect(isAcceptable('application/json;q=0, text/event-stream', 'application/json')).toBe(false);
    expect(isAcceptable('*/*, text/event-stream;q=0', 'text/event-stream')).toBe(false);
    expect(isAcceptable('*/*;q=0', 'application/json')).toBe(false);
    expect(isAcceptable(undefined, 'application/json')).toBe(false);
    expect(isAcceptable('', 'application/json')).toBe(false);
  });
});

describe('preferredType and prefersJson (/healthz: JSON or text)', () => {
  const cases: [string | undefined, 'json' | 'text'][] = [
    ['application/json', 'json'],
    ['text/plain, application/json;q=0.5', 'text'],
    ['application/json, text/plain;q=0.5', 'json'],
    ['*/*', 'text'],
    [undefined, 'text'],
    ['', 'text'],
    ['application/json, text/plain', 'text'],
    ['application/json, */*', 'json'],
    ['application/json, text/*', 'json'],
    ['application/*', 'json'],
    ['text/plain;q=0, */*', 'json'],
    ['application/json;q=0, */*', 'text'],
    ['text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8', 'text'],
    ['application/json, text/plain, */*', 'text'],
    ['image/png', 'text'],
  ];

  it('ranks by q, then by how specifically the header names the type, then by the order offered', () => {
    for (const [h, want] of cases) {
      expect(prefersJson(h), String(h)).toBe(want === 'json');
      const picked = preferredType(h, ['text/plain', 'application/json']);
      expect(picked === 'application/json', String(h)).toBe(want === 'json');
    }
    expect(preferredType('image/png', ['text/plain', 'application/json'])).toBeNull();
    expect(preferredType('*/*', ['application/json', 'text/plain'])).toBe('application/json');
  });

  it('agrees with isAcceptable: JSON is preferred only where it is acceptable', () => {
    for (const [h] of cases) if (prefersJson(h)) expect(isAcceptable(h, 'application/json'), String(h)).toBe(true);
  });
});
