import { describe, expect, it } from 'vitest';
import { Batches, type Waiting } from './batches.ts';

/** A run that records its items and waits for the test to let it finish. */
function recorder(opts: { perRun: number; atOnce?: number; distinct?: (item: string) => (string | null)[] }) {
  const runs: string[][] = [];
  const gates: (() => void)[] = [];
  const batches = new Batches<string, string>(
    async (calls: Waiting<string, string>[]) => {
      runs.push(calls.map((c) => c.item));
      await new Promise<void>((open) => gates.push(open));
      for (const c of calls) {
        if (c.item === 'bad') throw new Error('bad item');
        c.resolve(`${c.item}!`);
      }
    },
    { perRun: opts.perRun, atOnce: opts.atOnce ?? 1, distinct: opts.distinct },
  );
  const openNext = async () => {
    while (gates.length === 0) await new Promise((r) => setImmediate(r));
    gates.shift()!();
  };
  return { batches, runs, openNext };
}

describe('Batches.add', () => {
  it('runs a lone call at once, and the calls that arrive meanwhile together in the next run', async () => {
    const { batches, runs, openNext } = recorder({ perRun: 8 });
    const first = batches.add('k', 'a');
    const rest = ['b', 'c', 'd'].map((x) => batches.add('k', x));
    expect(runs).toEqual([['a']]);
    await openNext();
    await openNext();
    expect(await Promise.all([first, ...rest])).toEqual(['a!', 'b!', 'c!', 'd!']);
    expect(runs).toEqual([['a'], ['b', 'c', 'd']]);
  });

  it('takes at most perRun calls in one run, in arrival order', async () => {
    const { batches, runs, openNext } = recorder({ perRun: 2 });
    const all = ['a', 'b', 'c', 'd', 'e'].map((x) => batches.add('k', x));
    for (let i = 0; i < 3; i++) await openNext();
    await Promise.all(all);
    expect(runs).toEqual([['a'], ['b', 'c'], ['d', 'e']]);
  });

  it('runs other kinds beside each other, and up to atOnce runs of one kind', async () => {
    const { batches, runs, openNext } = recorder({ perRun: 8, atOnce: 2 });
    const all = [batches.add('k', 'a'), batches.add('k', 'b'), batches.add('j', 'x'), batches.add('k', 'c')];
    expect(runs).toEqual([['a'], ['b'], ['x']]);
    for (let i = 0; i < 4; i++) await openNext();
    expect(await Promise.all(all)).toEqual(['a!', 'b!', 'x!', 'c!']);
    expect(runs.at(-1)).toEqual(['c']);
  });

  it('keeps calls sharing a distinct key out of one run: the later waits for the next', async () => {
    const { batches, runs, openNext } = recorder({ perRun: 8, distinct: (item) => [item.slice(0, 1), null] });
    const all = ['a1', 'b1', 'a2', 'c1', 'a3'].map((x) => batches.add('k', x));
    for (let i = 0; i < 3; i++) await openNext();
    await Promise.all(all);
    expect(runs).toEqual([['a1'], ['b1', 'a2', 'c1'], ['a3']]);
  });

  it('runs each call of a run that threw again alone: only the call at fault is rejected', async () => {
    const { batches, runs, openNext } = recorder({ perRun: 8 });
    const first = batches.add('k', 'a');
    const rest = [batches.add('k', 'bad'), batches.add('k', 'b')];
    const settled = Promise.allSettled(rest);
    for (let i = 0; i < 4; i++) await openNext();
    expect(await first).toBe('a!');
    expect((await settled).map((s) => s.status)).toEqual(['rejected', 'fulfilled']);
    expect(runs).toEqual([['a'], ['bad', 'b'], ['bad'], ['b']]);
    const after = batches.add('k', 'c');
    await openNext();
    expect(await after).toBe('c!');
  });
});
