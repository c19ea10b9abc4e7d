import { describe, expect, it } from 'vitest';
import { Lanes } from './lanes.ts';

describe('Lanes.take', () => {
  it('gives the least held lane, the first of equals, so that under light load every taker gets the same one', () => {
    const lanes = new Lanes(['a', 'b', 'c']);
    expect(lanes.take()).toBe('a');
    lanes.give('a');
    expect(lanes.take()).toBe('a');
    expect(lanes.take()).toBe('b');
    expect(lanes.take()).toBe('c');
    expect(lanes.take()).toBe('a');
    lanes.give('b');
    expect(lanes.take()).toBe('b');
  });

  it('refuses to be built with no lane, and ignores giving back a lane nobody holds', () => {
    expect(() => new Lanes([])).toThrow(/at least one lane/);
    const lanes = new Lanes(['a', 'b']);
    lanes.give('a');
    expect(lanes.take()).toBe('a');
    expect(lanes.take()).toBe('b');
  });
});
