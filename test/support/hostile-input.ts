// Shared by the hostile-input fault files (test/faults/hostile-*.test.ts): the fuzz harness and the generators.

import { Writable } from 'node:stream';
import fc from 'fast-check';
import { afterAll, beforeAll, expect } from 'vitest';
import type { App } from '../../src/app.ts';
import { ManualClock } from '../../src/lib/clock.ts';
import { createLogger } from '../../src/lib/log.ts';
import { apiCaller, humanWithToken, migratedDatabase, startTestApp } from './app.ts';

/**
 * Fault: hostile input. fast-check throws random and half-valid input at every door a stranger or
 * a confused client can knock on: MCP JSON-RPC bodies (random bytes, random JSON, random methods
 * and params, every tool with random arguments), shift strings, webhook bodies and headers
 * (signed, wrongly signed, unsigned), the vend and push bodies of the API, and random path
 * segments where a slug, a ref, a token or a board id goes. For every case: no 5xx and no
 * `internal` tool error, nothing logged at error level, and a refusal changes nothing in the database (row counts
 * and the content of todos, endpoints and webhooks are compared before and after each refused
 * request). The server must still work at the end.
 */

export let db: Awaited<ReturnType<typeof migratedDatabase>>;
export let app: App & { clock: ManualClock };
export let api: ReturnType<typeof apiCaller>;
export let humanToken = '';
export let human: { handle: string; token: string };
const errorLogs: string[] = [];
const tally = new Map<string, Map<string, number>>();
export const clients: { close(): Promise<void> }[] = [];

/**
 * Everything a refusal must leave alone: row counts, and the full content of todos, webhooks and
 * endpoints (except last_seen_at, which authentication stamps at most once a minute whatever the
 * request then turns out to be).
 */
async function fingerprint(): Promise<string> {
  const [row] = await db.sql<{ f: string }[]>`
    select concat_ws('|',
      (select count(*) from todos), (select count(*) from events), (select count(*) from endpoints),
      (select count(*) from webhooks), (select count(*) from doorbell_rings), (select count(*) from doorbell_tests),
      (select count(*) from agents), (select count(*) from humans),
      (select md5(coalesce(string_agg(t::text, ',' order by t.id), '')) from todos t),
      (select md5(coalesce(string_agg((to_jsonb(e) - 'last_seen_at')::text, ',' order by e.id), '')) from endpoints e),
      (select md5(coalesce(string_agg(w::text, ',' order by w.id), '')) from webhooks w)) as f`;
  return row!.f;
}

export interface Outcome {
  status: number;
  /** Refused (an error status, a JSON-RPC error or a tool error): nothing may have changed. */
  refused: boolean;
  /** What the server answered, for the failure message. */
  answer: string;
}

/**
 * Runs a property over one door: each case moves the clock (refilling every rate-limit bucket),
 * sends, and checks the outcome against the database and the error log.
 */
export async function fuzz<T>(
  door: string,
  arb: fc.Arbitrary<T>,
  numRuns: number,
  /** `prepared()` after setting a case up: the refusal check then starts from there. */
  send: (input: T, prepared: () => Promise<void>) => Promise<Outcome>,
): Promise<void> {
  const statuses = tally.get(door) ?? new Map<string, number>();
  tally.set(door, statuses);
  let before = await fingerprint();
  await fc.assert(
    fc.asyncProperty(arb, async (input) => {
      app.clock.advance(10_000);
      const errorsBefore = errorLogs.length;
      const out = await send(input, async () => void (before = await fingerprint()));
      const key = `${out.status}${out.refused && out.status < 400 ? ' (refused)' : ''}`;
      statuses.set(key, (statuses.get(key) ?? 0) + 1);
      expect(out.status, out.answer).toBeLessThan(500);
      expect(out.answer).not.toMatch(/^internal: |"code":-32603/);
      expect(errorLogs.slice(errorsBefore)).toEqual([]);
      const after = await fingerprint();
      if (out.refused) expect(after, `a refusal changed the database: ${out.answer}`).toBe(before);
      before = after;
    }),
    // A fresh seed each run; FUZZ_SEED replays the one a failure printed.
    { numRuns, ...(process.env.FUZZ_SEED ? { seed: Number(process.env.FUZZ_SEED) } : {}) },
  );
}

export async function request(url: string, init: RequestInit): Promise<Outcome & { text: string; json: any }> {
  const res = await fetch(url, init);
  const text = await res.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, refused: res.status >= 400, answer: text.slice(0, 300), text, json };
}

// ------------------------------------------------------------------------------------------------
// Generators

/** Characters that have broken servers before: NUL, unpaired surrogates, separators, controls, quoting. */
const nastyChar = fc.constantFrom('\u0000', '\ud800', '\udfff', '\u2028', '\u202e', '\ufeff', '\u0085', '\u001b', '\u007f', '"', '\\', '\n', '\r', '<', '%', '\u{1f600}');
const hostileUnit = fc.oneof(
  { weight: 4, arbitrary: fc.string({ minLength: 1, maxLength: 1 }) },
  { weight: 1, arbitrary: nastyChar },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }) },
);
/** Strings of every kind: printable ASCII, any UTF-16 (NUL, controls, lone surrogates), graphemes. */
export const anyString = fc.oneof(fc.string(), fc.string({ unit: hostileUnit }), fc.string({ unit: 'grapheme' }), fc.string({ unit: 'binary-ascii' }));
export const anyJson = fc.oneof(fc.jsonValue(), fc.jsonValue({ stringUnit: hostileUnit }), fc.jsonValue({ stringUnit: 'grapheme', maxDepth: 6 }));
/** `valid` most of the time, anything otherwise. */
export const mostly = <T>(valid: fc.Arbitrary<T>, weight = 4) => fc.oneof({ weight, arbitrary: valid }, { weight: 1, arbitrary: fc.oneof(anyString, anyJson) as fc.Arbitrary<unknown> });
/** A header value fetch accepts (no CR/LF/NUL, no other controls). */
export const headerValue = fc.oneof(fc.string({ unit: 'binary-ascii' }), fc.string()).map((s) => s.replace(/[^\t\x20-\x7e]/g, '').trim());
export const contentType = fc.oneof(
  fc.constantFrom('application/json', 'application/json; charset=utf-8', 'application/vnd.github+json', 'text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/octet-stream', ''),
  headerValue,
);

/** A database and app of the calling file's own whose error-level log lines land in `errorLogs`; prints the tally of cases per door at the end. */
export function useHostileInputSuite(): void {
  beforeAll(async () => {
    db = await migratedDatabase();
    const log = createLogger(
      'info',
      new Writable({
        write: (c, _e, done) => {
          for (const line of c.toString().split('\n')) if (line && (JSON.parse(line) as { level: number }).level >= 50) errorLogs.push(line);
          done();
        },
      }),
    );
    app = await startTestApp(db.url, new ManualClock(), { log });
    human = await humanWithToken(db.sql);
    humanToken = human.token;
    api = apiCaller(app.url, humanToken);
  });
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close().catch(() => {})));
    await app.stop();
    await db.drop();
    const lines = [...tally].map(([door, statuses]) => `${door}: ${[...statuses].sort().map(([s, n]) => `${n}× ${s}`).join(', ')}`);
    const total = [...tally.values()].reduce((n, m) => n + [...m.values()].reduce((a, b) => a + b, 0), 0);
    console.info(`[faults] hostile input: ${total} cases\n  ${lines.join('\n  ')}`);
  });
}
