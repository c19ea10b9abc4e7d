import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migratedDatabase, startTestApp } from './support/app.ts';
import { haproxyInstalled, HAPROXY_BIN, startHaproxy, type Haproxy } from './support/haproxy.ts';
import { freePort } from './support/processes.ts';
import type { App } from '../src/app.ts';

/**
 * SWITCHBOARD_TRUSTED_PROXIES through a real HAProxy (`option forwardfor`, as docs/deploy.md shows
 * it). Two clients reach the balancer from different loopback addresses (127.0.0.2 and 127.0.0.3);
 * each instance's ingest limit is a burst of 2. Trusting the balancer, one client's flood leaves the
 * other its own bucket; not trusting it, both share the balancer's.
 */
if (!haproxyInstalled()) console.warn(`[trusted-proxies] skipped: ${HAPROXY_BIN} is not installed (apt-get install haproxy)`);

/** One bogus delivery from `from` through the balancer; resolves with the status. */
function deliverFrom(lb: Haproxy, from: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(`${lb.url}/webhooks/w/no-such-token`, { method: 'POST', localAddress: from, headers: { 'content-type': 'application/json' } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode!));
    });
    req.on('error', reject);
    req.end('{}');
  });
}

describe.skipIf(!haproxyInstalled())('per-address limits behind HAProxy', () => {
  let db: Awaited<ReturnType<typeof migratedDatabase>>;
  const apps: App[] = [];
  const balancers: Haproxy[] = [];

  beforeAll(async () => {
    db = await migratedDatabase();
  });
  afterAll(async () => {
    for (const lb of balancers) await lb.stop();
    for (const app of apps) await app.stop();
    await db?.drop();
  });

  const behindBalancer = async (env: Record<string, string>): Promise<Haproxy> => {
    const app = await startTestApp(db.url, undefined, { env, ingestLimit: { rate: 0.001, burst: 2 } });
    apps.push(app);
    const lb = await startHaproxy(await freePort(), [{ name: 's1', port: Number(new URL(app.url).port) }]);
    balancers.push(lb);
    return lb;
  };

  it('trusting the balancer: one client flooding does not 429 another', async () => {
    const lb = await behindBalancer({ SWITCHBOARD_TRUSTED_PROXIES: '127.0.0.1' });
    const flood = [];
    for (let i = 0; i < 4; i++) flood.push(await deliverFrom(lb, '127.0.0.2'));
    expect(flood).toEqual([404, 404, 429, 429]);
    expect(await deliverFrom(lb, '127.0.0.3')).toBe(404);
  });

  it('not trusting it: every client shares the balancer address', async () => {
    const lb = await behindBalancer({});
    const flood = [];
    for (let i = 0; i < 3; i++) flood.push(await deliverFrom(lb, '127.0.0.2'));
    expect(flood).toEqual([404, 404, 429]);
    expect(await deliverFrom(lb, '127.0.0.3')).toBe(429);
  });
});
