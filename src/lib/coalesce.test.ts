import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { Coalesced } from './coalesce.ts';

describe('Coalesced', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('runs once after a burst of requests goes quiet', async () => {
    let runs = 0;
    const c = new Coalesced(async () => void runs++, 1000);
    for (let i = 0; i < 50; i++) {
      c.request();
      await vi.advanceTimersByTimeAsync(100);
    }
    expect(runs).toBe(0);
    await vi.advanceTimersByTimeAsync(1000);
    expect(runs).toBe(1);
    await vi.advanceTimersByTimeAsync(10_000);
    expect(runs).toBe(1);
  });

  it('never runs twice at once: requests during a run make exactly one more run after it', async () => {
    let active = 0;
    let most = 0;
    let runs = 0;
    let release!: () => void;
    const c = new Coalesced(async () => {
      runs++;
      active++;
      most = Math.max(most, active);
      await new Promise<void>((r) => (release = r));
      active--;
    }, 10);
    c.request();
    await vi.advanceTimersByTimeAsync(10);
    expect(runs).toBe(1);
    for (let i = 0; i < 20; i++) c.request();
    await vi.advanceTimersByTimeAsync(100);
    expect(runs).toBe(1);
    release();
    await vi.advanceTimersByTimeAsync(10);
    expect(runs).toBe(2);
    release();
    await vi.advanceTimersByTimeAsync(100);
    expect(runs).toBe(2);
    expect(most).toBe(1);
  });

  it('a failed run is reported and does not stop later runs; cancel drops a pending one', async () => {
    const errors: unknown[] = [];
    let runs = 0;
    const c = new Coalesced(
      async () => {
        runs++;
        throw new Error('boom');
      },
      10,
      (err) => errors.push(err),
    );
    c.request();
    await vi.advanceTimersByTimeAsync(10);
    c.request();
    await vi.advanceTimersByTimeAsync(10);
    expect(runs).toBe(2);
    expect(errors).toHaveLength(2);
    c.request();
    c.cancel();
    await vi.advanceTimersByTimeAsync(100);
    expect(runs).toBe(2);
  });
});
