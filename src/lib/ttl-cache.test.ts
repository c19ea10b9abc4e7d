import { describe, expect, it } from 'vitest';
import { ManualClock } from './clock.ts';
import { TtlCache } from './ttl-cache.ts';

describe('TtlCache', () => {
  it('answers an entry until its time is up, then forgets it', () => {
    const clock = new ManualClock('2026-12-01T00:00:00Z');
    const cache = new TtlCache<string, number>(clock, 1000);
    cache.set('a', 1);
    clock.advance(999);
    expect(cache.get('a')).toBe(1);
    clock.advance(1);
    expect(cache.get('a')).toBeUndefined();
    expect(cache.size).toBe(0);
  });

  it('holds at most maxEntries, dropping the oldest set', () => {
    const cache = new TtlCache<string, number>(new ManualClock(), 60_000, 2);
    cache.set('a', 1);
    cache.set('b', 2);
    cache.set('a', 3); // set again: now the newest
    cache.set('c', 4);
    expect([cache.get('a'), cache.get('b'), cache.get('c')]).toEqual([3, undefined, 4]);
  });

  it('does not keep a value loaded while an invalidation ran', () => {
    const cache = new TtlCache<string, number>(new ManualClock(), 60_000);
    const before = cache.mark();
    cache.delete('elsewhere');
    cache.setUnlessDropped(before, 'a', 1);
    expect(cache.get('a')).toBeUndefined();
    cache.setUnlessDropped(cache.mark(), 'a', 2);
    expect(cache.get('a')).toBe(2);
  });

  it('deletes one key, every entry whose value matches, or all', () => {
    const cache = new TtlCache<string, { webhook: string }>(new ManualClock(), 60_000);
    cache.set('t1', { webhook: 'w1' });
    cache.set('t2', { webhook: 'w1' });
    cache.set('t3', { webhook: 'w2' });
    cache.deleteWhere((v) => v.webhook === 'w1');
    expect([cache.get('t1'), cache.get('t2'), cache.get('t3')]).toEqual([undefined, undefined, { webhook: 'w2' }]);
    cache.delete('t3');
    expect(cache.size).toBe(0);
    cache.set('t4', { webhook: 'w3' });
    cache.clear();
    expect(cache.get('t4')).toBeUndefined();
  });
});
