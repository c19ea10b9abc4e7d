/**
 * Where the history's cost in a claim + complete goes (issue 39: at most 5 % of claim throughput).
 * Variants, each against no history (the four triggers disabled) in the same round:
 *  - shipped: the triggers as migration 0032 left them, a row per change into todo_history_delta;
 *  - empty: the same triggers firing with an empty body (todo_history_on_update returns at once),
 *    which is what firing them costs: the transition tables and the after-trigger queue;
 *  - unlogged: the shipped triggers into todo_history_delta made UNLOGGED, which is what the
 *    rows' WAL costs;
 *  - rowlevel: the update trigger as a row-level one (WHEN the state changed) inserting VALUES
 *    from OLD and NEW, which is what the transition tables and their join cost.
 * `--durable` runs PostgreSQL with its durable defaults (fsync, synchronous_commit and
 * full_page_writes on) instead of the bench's usual non-durable cluster. One worker, the
 * store's own ClaimNext and HeldTransitions on one connection, so every statement pays its
 * triggers alone and nothing is batched: the path where the history costs the most. Each round
 * runs `--jobs` claims + completions per variant, the variants' order turning each round, and
 * records wall time and CPU (this process and PostgreSQL's, from /proc) per todo; the figure is the
 * median over rounds of each variant's share over no history in the same round, so a neighbour's
 * load that comes and goes hits the variants it is compared with alike.
 *
 *   npm run bench:history-delta -- [--rounds 20] [--jobs 1000] [--durable] [--json]
 */
import { parseArgs } from 'node:util';
import { connect } from '../src/db/connect.ts';
import { systemClock } from '../src/lib/clock.ts';
import { vendEndpoint } from '../src/store/endpoints.ts';
import { addHuman } from '../src/store/humans.ts';
import { ClaimNext, HeldTransitions, type Caller } from '../src/store/todos/index.ts';
import { Lanes } from '../src/lib/lanes.ts';
import { benchCommit, cpuCounter, figure, printJsonLast, seedPendingTodos, withBenchDatabase } from './lib.ts';

const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '20' },
    jobs: { type: 'string', default: '1000' },
    durable: { type: 'boolean', default: false },
    json: { type: 'boolean', default: false },
  },
});
const rounds = Number(args.rounds);
const jobs = Number(args.jobs);
const VARIANTS = ['none', 'shipped', 'empty', 'unlogged', 'rowlevel'] as const;
type Variant = (typeof VARIANTS)[number];
interface Sample {
  wall: number;
  cpu: number;
  pg: number;
}

await withBenchDatabase(3, async ({ cluster, sql, pgVersion }) => {
  const human = await addHuman(sql, { handle: 'delta' });
  const { endpoint } = await vendEndpoint(sql, human.id, { name: 'delta', queues: ['work'] }, systemClock.now());
  // Every variant's every round, and a warm-up block per variant.
  await seedPendingTodos(sql, endpoint.id, jobs * (rounds + 1) * VARIANTS.length + 100);
  // One connection: a pool of one, as its own lane.
  const one = connect(cluster.url, { max: 1 });
  const lanes = new Lanes([one]);
  const caller: Caller = { endpointId: endpoint.id, owner: `agent:${endpoint.agent_id}`, queues: ['work'] };
  const claimNext = new ClaimNext(one, lanes);
  const held = new HeldTransitions(one, lanes);

  const triggers = async (verb: 'enable' | 'disable') => {
    await sql.unsafe(`alter table todos ${verb} trigger todo_history_insert, ${verb} trigger todo_history_update`);
    await sql.unsafe(`alter table doorbell_rings ${verb} trigger ring_history_insert, ${verb} trigger ring_history_update`);
  };
  const shippedBody = (await sql`select pg_get_functiondef('todo_history_on_update'::regproc) as d`)[0]!.d as string;
  const emptyBody = `create or replace function todo_history_on_update() returns trigger language plpgsql as $$ begin return null; end $$`;
  await sql.unsafe(`create or replace function todo_history_on_update_row() returns trigger language plpgsql as $$
begin
  insert into todo_history_delta (bucket, endpoint_id, queue, claimed, completed, failed, dead, pending_change, claimed_change, wait_bin)
  values (date_trunc('minute', NEW.updated_at), NEW.endpoint_id, NEW.queue,
         (NEW.state = 'claimed')::int,
         (NEW.state = 'done' and OLD.state <> 'failed')::int,
         (NEW.state = 'failed' and OLD.state <> 'done')::int,
         (NEW.state = 'failed' and OLD.state <> 'done' and NEW.next_retry_at is null)::int,
         (NEW.state = 'pending')::int - (OLD.state = 'pending')::int,
         (NEW.state = 'claimed')::int - (OLD.state = 'claimed')::int,
         case when NEW.state = 'claimed' and NEW.claimed_at is not null then
           least(47, greatest(0, ceil(ln(greatest(date_part('epoch', NEW.claimed_at - NEW.created_at) * 1000, 1) / 100.0) / ln(1.5))))::smallint
         end);
  return null;
end $$`);
  await sql.unsafe(`create trigger todo_history_update_row after update on todos for each row
    when (not NEW.synthetic and NEW.state <> OLD.state) execute function todo_history_on_update_row()`);
  const become = async (v: Variant) => {
    await triggers(v === 'none' ? 'disable' : 'enable');
    if (v === 'rowlevel') await sql.unsafe('alter table todos disable trigger todo_history_update');
    await sql.unsafe(`alter table todos ${v === 'rowlevel' ? 'enable' : 'disable'} trigger todo_history_update_row`);
    await sql.unsafe(v === 'empty' ? emptyBody : shippedBody);
    await sql.unsafe(`alter table todo_history_delta set ${v === 'unlogged' ? 'unlogged' : 'logged'}`);
  };
  /** One block of `jobs` claims + completions: wall time and CPU (this process, PostgreSQL) per todo, µs. */
  const block = async (): Promise<Sample> => {
    const spent = cpuCounter();
    const t0 = performance.now();
    for (let i = 0; i < jobs; i++) {
      const t = await claimNext.claim(caller, ['work'], 300, systemClock.now());
      if (!t) throw new Error('the queue ran dry: seed more todos');
      await held.complete(caller, { id: t.id, result: { ok: true }, now: systemClock.now(), leaseTokenHash: null });
    }
    const wall = ((performance.now() - t0) * 1000) / jobs;
    const cpu = spent(jobs);
    return { wall, cpu: (cpu.node + cpu.pg) * 1000, pg: cpu.pg * 1000 };
  };

  for (const v of VARIANTS) await become(v).then(block);
  const samples: Record<Variant, Sample[]> = { none: [], shipped: [], empty: [], unlogged: [], rowlevel: [] };
  for (let r = 0; r < rounds; r++) {
    const order = VARIANTS.map((_, i) => VARIANTS[(i + r) % VARIANTS.length]!);
    for (const v of order) {
      await become(v);
      samples[v].push(await block());
    }
    // Folded between rounds, as the history loop would, so the table stays a minute's size.
    await sql`delete from todo_history_delta`;
  }
  await one.end({ timeout: 5 });

  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  /** The median over rounds of a variant's figure against no history's in the same round, less 1. */
  const over = (v: Variant, k: keyof Sample) => median(samples[v].map((x, r) => x[k] / samples.none[r]![k])) - 1;
  const pct = (x: number) => `${x >= 0 ? '+' : ''}${(x * 100).toFixed(1)} %`;
  console.log(`claim + complete, one worker, ${rounds} rounds of ${jobs} todos a variant, ${args.durable ? 'durable' : 'non-durable'} PostgreSQL (median µs per todo; median of each round's share over no history)`);
  console.log('  variant    wall µs   over none   CPU µs   over none   PostgreSQL CPU µs   over none');
  const figures: Record<string, unknown> = { commit: benchCommit(), rounds, jobs, durable: args.durable };
  for (const v of VARIANTS) {
    const m = (k: keyof Sample) => median(samples[v].map((x) => x[k]));
    const cell = (k: keyof Sample) => `${m(k).toFixed(0).padStart(8)}  ${v === 'none' ? ''.padStart(10) : pct(over(v, k)).padStart(10)}`;
    console.log(`  ${v.padEnd(9)}${cell('wall')} ${cell('cpu')} ${cell('pg').padStart(30)}`);
    for (const k of ['wall', 'cpu', 'pg'] as const) {
      figures[`${v}_${k}_us`] = figure(m(k), 1);
      if (v !== 'none') figures[`${v}_${k}_over_none`] = figure(over(v, k), 4);
    }
  }
  if (args.json) printJsonLast('history-delta', pgVersion, figures);
}, { durable: args.durable });
