import { describe, expect, it } from 'vitest';
import { withApp } from '../support/fixtures.ts';

/**
 * Issue 17 item 14: a client cycling made-up bearer tokens. Baseline, same run: the same number of
 * bogus requests each from a fresh forwarded address (every one is a first failure, so every one
 * is looked up in the database and answered 401, as every bogus request was before the limit).
 * Then all from one address: after the burst of 20 the rest are 429 before any lookup. A client
 * with a valid token, at another address, is served meanwhile.
 */
const fixture = withApp({ env: { SWITCHBOARD_TRUSTED_PROXIES: '127.0.0.1' } });
const REQUESTS = 2_000;
const IN_FLIGHT = 16;

async function flood(clientOf: (i: number) => string): Promise<{ ms: number; statuses: Map<number, number> }> {
  const statuses = new Map<number, number>();
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      while (next < REQUESTS) {
        const i = next++;
        const res = await fetch(`${fixture.app.url}/api/v1/me`, { headers: { authorization: `Bearer sbp_made_up_${i}`, 'x-forwarded-for': clientOf(i) } });
        await res.arrayBuffer();
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
      }
    }),
  );
  return { ms: performance.now() - started, statuses };
}

describe('a client cycling bogus tokens', () => {
  it('is looked up 20 times, then refused before the database; a valid client elsewhere is served', async () => {
    const baseline = await flood((i) => `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`);
    expect(baseline.statuses.get(401)).toBe(REQUESTS);

    const served: number[] = [];
    const bystander = (async () => {
      for (let i = 0; i < 30; i++) {
        const t = performance.now();
        const r = await fetch(`${fixture.app.url}/api/v1/me`, { headers: { authorization: `Bearer ${fixture.human.token}`, 'x-forwarded-for': '198.51.100.1' } });
        await r.arrayBuffer();
        expect(r.status).toBe(200);
        served.push(performance.now() - t);
      }
    })();
    const limited = await flood(() => '203.0.113.66');
    await bystander;
    expect(limited.statuses.get(401)).toBe(20);
    expect(limited.statuses.get(429)).toBe(REQUESTS - 20);

    const rate = (r: { ms: number }) => Math.round(REQUESTS / (r.ms / 1000));
    served.sort((a, b) => a - b);
    console.log(
      `[faults] bogus tokens: baseline ${REQUESTS} from fresh addresses ${rate(baseline)} req/s, ${baseline.statuses.get(401)} lookups (401); ` +
        `from one address ${rate(limited)} req/s, ${limited.statuses.get(401)} lookups, ${limited.statuses.get(429)} refused 429 before the lookup; ` +
        `valid client at another address 30/30 served, p50 ${served[15]!.toFixed(1)} ms, max ${served.at(-1)!.toFixed(1)} ms`,
    );
  });
});
