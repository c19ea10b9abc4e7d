import { describe, expect, it } from 'vitest';
import { Batches, gatheredRuns, pipelinedRuns, type Waiting } from './batches.ts';
import { Lanes } from './lanes.ts';

/** A run that records its items (and the lane it went to) and waits for the test to let it finish. */
function recorder(opts: { perRun: number; atOnce?: number; moreAt?: number; gather?: boolean; distinct?: (item: string) => (string | null)[]; lanes?: string[] }) {
  const runs: string[][] = [];
  const lanesOfRuns: string[] = [];
  const gates: (() => void)[] = [];
  const lanes = new Lanes(opts.lanes ?? ['only']);
  const batches = new Batches<string, string, string>(
    async (calls: Waiting<string, string>[], lane: string) => {
      runs.push(calls.map((c) => c.item));
      lanesOfRuns.push(lane);
      await new Promise<void>((open) => gates.push(open));
      for (const c of calls) {
        if (c.item === 'bad') throw new Error('bad item');
        c.resolve(`${c.item}!`);
      }
    },
    { perRun: opts.perRun, atOnce: opts.atOnce ?? 1, moreAt: opts.moreAt, gather: opts.gather, distinct: opts.distinct },
    lanes,
  );
  const openNext = async () => {
    while (gates.length === 0) await new Promise((r) => setImmediate(r));
    gates.shift()!();
  };
  return { batches, runs, lanesOfRuns, lanes, openNext };
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

  it('starts a second run of a kind beside the first only once moreAt calls wait; the last run going takes the rest', async () => {
    const { batches, runs, openNext } = recorder({ perRun: 8, atOnce: 2, moreAt: 4 });
    const all = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'].map((x) => batches.add('k', x));
    // 'a' alone; b-e started beside it when the fourth arrived; f-h wait for whichever ends last.
    expect(runs).toEqual([['a'], ['b', 'c', 'd', 'e']]);
    await openNext();
    await new Promise((r) => setImmediate(r));
    expect(runs).toHaveLength(2);
    await openNext();
    await openNext();
    expect(await Promise.all(all)).toEqual(['a!', 'b!', 'c!', 'd!', 'e!', 'f!', 'g!', 'h!']);
    expect(runs.at(-1)).toEqual(['f', 'g', 'h']);
  });

  it('sends every run of a kind to the lane it holds, another kind to a lane with room for it, and gives a lane back after its last run', async () => {
    const { batches, lanesOfRuns, lanes, openNext } = recorder({ perRun: 8, atOnce: 2, moreAt: 1, lanes: ['one', 'two'] });
    const k = [batches.add('k', 'a'), batches.add('k', 'b')];
    const j = batches.add('j', 'x');
    // Two kinds share the first lane (KINDS_PER_LANE); a third takes the next.
    const i = batches.add('i', 'y');
    expect(lanesOfRuns).toEqual(['one', 'one', 'one', 'two']);
    for (let n = 0; n < 4; n++) await openNext();
    await Promise.all([...k, j, i]);
    await new Promise((r) => setImmediate(r));
    // Every kind ended: each gave its lane back, so the next takers fill the first lane again.
    expect(lanes.take()).toBe('one');
    expect(lanes.take()).toBe('one');
    expect(lanes.take()).toBe('two');
  });

  it('with gather, sends a kind\'s first run on the next turn with every call of this one; later calls wait for it as before', async () => {
    const { batches, runs, openNext } = recorder({ perRun: 3, gather: true });
    const thisTurn = ['a', 'b', 'c', 'd'].map((x) => batches.add('k', x));
    const other = batches.add('j', 'x');
    expect(runs).toEqual([]);
    await new Promise((r) => setImmediate(r));
    // One run per kind, up to perRun; what is left waits for the run going.
    expect(runs).toEqual([['a', 'b', 'c'], ['x']]);
    const meanwhile = batches.add('k', 'e');
    for (let i = 0; i < 3; i++) await openNext();
    expect(await Promise.all([...thisTurn, other, meanwhile])).toEqual(['a!', 'b!', 'c!', 'd!', 'x!', 'e!']);
    expect(runs.slice(2)).toEqual([['d', 'e']]);
    // Once the kind is idle again, a lone call still goes on the next turn, alone.
    const lone = batches.add('k', 'f');
    await openNext();
    expect(await lone).toBe('f!');
    expect(runs.at(-1)).toEqual(['f']);
  });

  it('pipelinedRuns: a second run once half a run waits; gatheredRuns: the same, gathering each first run', () => {
    expect(pipelinedRuns(16)).toEqual({ perRun: 16, atOnce: 2, moreAt: 8 });
    expect(pipelinedRuns(5)).toEqual({ perRun: 5, atOnce: 2, moreAt: 3 });
    expect(gatheredRuns(8)).toEqual({ perRun: 8, atOnce: 2, moreAt: 4, gather: true });
  });
});
