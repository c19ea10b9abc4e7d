import { describe, expect, it } from 'vitest';
import { ManualClock } from '../lib/clock.ts';
import { SessionRegistry } from '../sessions/registry.ts';
import { vend, withApp } from '../../test/support/fixtures.ts';
import { initialize, initParams, mcp, openStream, request } from '../../test/support/mcp-transport.ts';

/** One credential cannot pile up sessions: a cap per endpoint (here 2) and one per instance. */
const f = withApp({ env: { SWITCHBOARD_SESSIONS_PER_ENDPOINT: '2' }, refillMs: 60_000 });

describe('the per-endpoint session cap', () => {
  it('at the cap, an initialize closes the oldest session that has no stream and nothing in flight', async () => {
    const ep = await vend(f.api, { name: 'restarts-a-lot' });
    const first = await initialize(ep);
    const second = await initialize(ep);
    const third = await initialize(ep);
    expect(f.app.sessions.sessionsOf(ep.id).map((s) => s.id).sort()).toEqual([second.sid, third.sid].sort());
    const gone = await mcp(ep, 'POST', { sid: first.sid, body: request('tools/list') });
    expect(gone.status).toBe(404);
  });

  it('when every session has an open stream, initialize is refused with 429 and Retry-After, and nothing is closed', async () => {
    const ep = await vend(f.api, { name: 'busy' });
    const a = await initialize(ep);
    const b = await initialize(ep);
    const streams = [await openStream(ep, a.sid), await openStream(ep, b.sid)];
    try {
      const refused = await mcp(ep, 'POST', { body: request('initialize', initParams()) });
      expect(refused.status).toBe(429);
      expect(refused.headers.get('retry-after')).toBe('60');
      expect(refused.text).toContain('already holds 2 live sessions');
      expect(f.app.sessions.sessionsOf(ep.id).map((s) => s.id).sort()).toEqual([a.sid, b.sid].sort());
    } finally {
      for (const s of streams) s.abort();
    }
  });

  it('is per endpoint: another endpoint of the same human is not affected', async () => {
    const full = await vend(f.api, { name: 'full' });
    await initialize(full);
    await initialize(full);
    const other = await vend(f.api, { name: 'other' });
    await initialize(other);
    expect(f.app.sessions.sessionsOf(other.id)).toHaveLength(1);
  });
});

describe('SessionRegistry', () => {
  const endpoint = (id: string) => ({ id, slug: id, queues: ['inbox'], verbs: [] });
  const client = { name: 'test', version: '1' };

  it('holds at most its instance maximum, and indexes sessions by endpoint', () => {
    const registry = new SessionRegistry(new ManualClock(), { maxPerEndpoint: 10, maxTotal: 3 });
    const a1 = registry.create(endpoint('a') as never, '2025-11-25', client);
    registry.create(endpoint('a') as never, '2025-11-25', client);
    registry.create(endpoint('b') as never, '2025-11-25', client);
    expect(() => registry.create(endpoint('c') as never, '2025-11-25', client)).toThrow(expect.objectContaining({ code: 'rate_limited' }));
    expect(registry.sessionsOf('a')).toHaveLength(2);
    registry.close(a1, 'test');
    expect(registry.sessionsOf('a')).toHaveLength(1);
    expect(registry.sessionsOf('c')).toEqual([]);
    registry.create(endpoint('c') as never, '2025-11-25', client);
    expect(registry.sessionsOf('c')).toHaveLength(1);
  });
});
