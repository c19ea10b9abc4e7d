import { describe, expect, it } from 'vitest';
import { KINDS_PER_LANE, Lanes } from './lanes.ts';

describe('Lanes.take', () => {
  it(`gives the first lane held by fewer than ${KINDS_PER_LANE} kinds, so that under light load every taker gets the same one`, () => {
    expect(KINDS_PER_LANE).toBe(2);
    const lanes = new Lanes(['a', 'b', 'c']);
    expect(lanes.take()).toBe('a');
    lanes.give('a');
    expect(lanes.take()).toBe('a');
    expect(lanes.take()).toBe('a');
    expect(lanes.take()).toBe('b');
    expect(lanes.take()).toBe('b');
    expect(lanes.take()).toBe('c');
    lanes.give('a');
    expect(lanes.take()).toBe('a');
  });

  it('once every lane is full, gives the least held, the first of equals', () => {
    const lanes = new Lanes(['a', 'b']);
    for (let i = 0; i < 2 * KINDS_PER_LANE; i++) lanes.take();
    expect(lanes.take()).toBe('a');
    expect(lanes.take()).toBe('b');
    lanes.give('a');
    lanes.give('a');
    expect(lanes.take()).toBe('a');
  });

  it('refuses to be built with no lane, and ignores giving back a lane nobody holds', () => {
    expect(() => new Lanes([])).toThrow(/at least one lane/);
    const lanes = new Lanes(['a', 'b']);
    lanes.give('a');
    expect(lanes.take()).toBe('a');
    expect(lanes.take()).toBe('a');
    expect(lanes.take()).toBe('b');
  });
});
