import { describe, expect, it } from 'vitest';
import { ManualClock } from '../lib/clock.ts';
import { SessionRegistry } from '../sessions/registry.ts';
import { vend, withApp } from '../../test/support/fixtures.ts';
import { initialize, initParams, mcp, openStream, request } from '../../test/support/mcp-transport.ts';

/** One credential cannot pile up sessions: a cap per endpoint (here 2) and one per instance. */
const f = withApp({ env: { SWITCHBOARD_SESSIONS_PER_ENDPOINT: '2' }, refillMs: 60_000 });

describe('the per-endpoint session cap', () => {
  it('at the cap, an initialize ends the stream-less session seen longest ago, on every instance', async () => {
    const ep = await vend(f.api, { name: 'restarts-a-lot' });
    const first = await initialize(ep);
    const second = await initialize(ep);
    const third = await initialize(ep);
    expect((await f.app.services.directory.sessionsOf(ep.id)).map((s) => s.id).sort()).toEqual([second.sid, third.sid].sort());
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
      expect((await f.app.services.directory.sessionsOf(ep.id)).map((s) => s.id).sort()).toEqual([a.sid, b.sid].sort());
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
    expect(await f.app.services.directory.sessionsOf(other.id)).toHaveLength(1);
  });
});

describe('SessionRegistry', () => {
  const endpoint = (id: string) => ({ id, slug: id, queues: ['inbox'], verbs: [] });
  const facts = { protocolVersion: '2025-11-25', clientInfo: { name: 'test', version: '1' } };

  it('keeps at most its instance maximum of copies: the idlest copy makes room, and a busy instance refuses', () => {
    const clock = new ManualClock();
    const registry = new SessionRegistry(clock, { maxTotal: 3 });
    const a1 = registry.create(endpoint('a') as never, facts);
    clock.advance(1000);
    const a2 = registry.create(endpoint('a') as never, facts);
    const b = registry.create(endpoint('b') as never, facts);
    registry.create(endpoint('c') as never, facts);
    expect(registry.peek(a1.id)).toBeUndefined();
    expect(registry.sessionsOf('a').map((s) => s.id)).toEqual([a2.id]);
    for (const s of registry.all()) s.inFlight = 1;
    expect(() => registry.create(endpoint('d') as never, facts)).toThrow(expect.objectContaining({ code: 'rate_limited' }));
    expect(registry.sessionsOf('d')).toEqual([]);
    expect(registry.peek(b.id)).toBe(b);
  });
});
