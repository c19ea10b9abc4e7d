import { EventEmitter } from 'node:events';
import type { ServerResponse } from 'node:http';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { BoardEvents } from '../board/sse.ts';
import { SessionRegistry } from '../sessions/registry.ts';
import { ManualClock } from './clock.ts';
import { createLogger } from './log.ts';
import { startKeepalive } from './sse.ts';

const KEEPALIVE = ': keepalive\n\n';

/** A response whose buffer the test fills and empties by hand. */
class FakeResponse extends EventEmitter {
  destroyed = false;
  writableEnded = false;
  writableLength = 0;
  readonly writes: string[] = [];
  write(chunk: string): boolean {
    this.writes.push(String(chunk));
    return true;
  }
  writeHead(): this {
    return this;
  }
  flushHeaders(): void {}
  end(): void {
    this.writableEnded = true;
    this.emit('close');
  }
  destroy(): void {
    this.destroyed = true;
    this.emit('close');
  }
  keepalives(): number {
    return this.writes.filter((w) => w === KEEPALIVE).length;
  }
}

const asResponse = (r: FakeResponse) => r as unknown as ServerResponse;

/** Checks the keepalive rule on a stream `open` has attached: a comment per interval, only to an empty buffer, none once closed. */
async function expectTheRule(res: FakeResponse, intervalMs: number, close: () => void): Promise<void> {
  await vi.advanceTimersByTimeAsync(intervalMs);
  expect(res.keepalives()).toBe(1);
  await vi.advanceTimersByTimeAsync(intervalMs);
  expect(res.keepalives()).toBe(2);
  // Bytes unsent: not idle, and a client that does not read must not be grown.
  res.writableLength = 100;
  await vi.advanceTimersByTimeAsync(intervalMs * 3);
  expect(res.keepalives()).toBe(2);
  res.writableLength = 0;
  await vi.advanceTimersByTimeAsync(intervalMs);
  expect(res.keepalives()).toBe(3);
  close();
  await vi.advanceTimersByTimeAsync(intervalMs * 3);
  expect(res.keepalives()).toBe(3);
}

describe('startKeepalive', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('writes a comment each interval to an empty buffer only, and none to an ended or destroyed stream', async () => {
    const res = new FakeResponse();
    const timer = startKeepalive(asResponse(res), 1000);
    await expectTheRule(res, 1000, () => (res.writableEnded = true));
    res.writableEnded = false;
    res.destroyed = true;
    await vi.advanceTimersByTimeAsync(3000);
    expect(res.keepalives()).toBe(3);
    clearInterval(timer);
  });

  it('keeps no process alive', () => {
    vi.useRealTimers();
    const timer = startKeepalive(asResponse(new FakeResponse()), 1000);
    expect(timer.hasRef()).toBe(false);
    clearInterval(timer);
  });
});

describe('both event streams keep alive by the same rule', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('the MCP notification stream (SessionRegistry)', async () => {
    const registry = new SessionRegistry(new ManualClock(), { keepaliveMs: 1000 });
    const session = registry.create({ id: 'ep', slug: 'ep', agentId: 'agent', queues: ['q'], verbs: [], webhookMax: 1 }, { protocolVersion: '2025-11-25', clientInfo: { name: 'test', version: '1' } });
    const res = new FakeResponse();
    registry.attachStream(session, asResponse(res));
    await expectTheRule(res, 1000, () => res.end());
  });

  it('the board live updates (BoardEvents)', async () => {
    const human = { id: 'h1' };
    const events = new BoardEvents({
      endpoints: { listOwn: async () => [] },
      reads: { latestSelfTests: async () => [], todoChangesSince: async () => [] },
      clock: new ManualClock(),
      log: createLogger('silent'),
      sessions: { findWebSession: async () => ({ human, expiresAt: new Date(Date.now() + 3_600_000) }) as never },
      sessionCounts: async () => new Map(),
      pollMs: 60_000,
      keepaliveMs: 1000,
    } as unknown as ConstructorParameters<typeof BoardEvents>[0]);
    const res = new FakeResponse();
    events.subscribe(human.id, { token: 't', key: 'k' }, asResponse(res), new Date(Date.now() + 3_600_000));
    await expectTheRule(res, 1000, () => res.end());
    events.closeAll();
  });
});
