import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/lib/log.ts';
import { retentionPass } from '../../src/services/maintenance/retention.ts';
import { push, vend, withApp } from '../support/fixtures.ts';

/**
 * Issue 17 item 15a under volume: 30,000 finished todos with 4 KiB raw bodies past retention and
 * 2,000 live todos just as old. Passes run (10 statements of 1,000 rows each per tick) until the
 * backlog is gone, while pushes are timed; baseline, same run: the same pushes with no pass.
 */
const f = withApp({ refillMs: 0 });
const DAY = 24 * 3_600_000;
const FINISHED = 30_000;
const LIVE = 2_000;
const PUSHES = 200;

const p99 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length * 0.99)]!;

async function timedPushes(slug: string, n: number): Promise<number[]> {
  const ms: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await push(f.api, slug, { queue: 'reviews', title: `push ${i}` });
    ms.push(performance.now() - t);
    f.app.clock.advance(1_000);
  }
  return ms;
}

async function seed(endpointId: string, n: number, state: 'done' | 'pending', at: Date): Promise<void> {
  await f.sql`
    with ev as (
      insert into events (source, family, trust_mode, verified, payload, payload_size, endpoint_id, received_at)
      select 'operator', 'operator', 'operator', false, convert_to(repeat('x', 4096), 'UTF8'), 4096, ${endpointId}, ${at}
      from generate_series(1, ${n}) returning id
    )
    insert into todos (id, endpoint_id, queue, title, event_id, state, created_at, updated_at, completed_at)
    select 'td_' || gen_random_uuid(), ${endpointId}, 'reviews', 'seeded', id, ${state}, ${at}, ${at},
           case when ${state} = 'done' then ${at}::timestamptz end
    from ev`;
}

describe('retention under volume', () => {
  it('drains 30,000 finished todos and their bodies in batches, keeps every live todo, and pushes go on', async () => {
    const e = await vend(f.api, { name: 'volume', queues: ['reviews'] });
    const old = new Date(f.app.clock.now().getTime() - 40 * DAY);
    await seed(e.id, FINISHED, 'done', old);
    await seed(e.id, LIVE, 'pending', old);
    const size = async () => Number((await f.sql`select pg_total_relation_size('events') as b`)[0]!.b);
    const before = await size();

    const baseline = await timedPushes(e.slug, PUSHES);

    const deps = { sql: f.sql, clock: f.app.clock, log: createLogger('silent'), retentionMs: 30 * DAY };
    const passes: { ms: number; todos: number }[] = [];
    let more = true;
    const draining = (async () => {
      while (more) {
        const t = performance.now();
        const r = await retentionPass(deps);
        passes.push({ ms: performance.now() - t, todos: r.todos });
        more = r.more;
      }
    })();
    const during = await timedPushes(e.slug, PUSHES);
    await draining;

    const [left] = await f.sql<{ done: number; live: number; events: number }[]>`
      select count(*) filter (where state = 'done')::int as done, count(*) filter (where state = 'pending')::int as live,
             (select count(*) from events where endpoint_id = ${e.id})::int as events
      from todos where endpoint_id = ${e.id}`;
    expect(left!.done).toBe(0);
    expect(left!.live).toBe(LIVE + 2 * PUSHES);
    expect(left!.events).toBe(LIVE + 2 * PUSHES);
    expect(passes.reduce((n, p) => n + p.todos, 0)).toBe(FINISHED);
    expect(passes.length).toBeGreaterThanOrEqual(3);
    const perBatch = passes.filter((p) => p.todos === 10_000).map((p) => p.ms / 10);
    console.log(
      `[faults] retention: ${FINISHED} finished todos (4 KiB bodies) in ${passes.length} passes, ` +
        `${passes.map((p) => `${p.todos} in ${Math.round(p.ms)} ms`).join(', ')}; ~${Math.round(Math.max(...perBatch))} ms per 1,000-row statement; ` +
        `events table ${(before / 2 ** 20).toFixed(0)} MiB before; push p99 ${p99(baseline).toFixed(1)} ms baseline, ${p99(during).toFixed(1)} ms during the passes`,
    );
    // A push waits on no retention statement for long: p99 within 250 ms of the baseline's.
    expect(p99(during)).toBeLessThan(p99(baseline) + 250);
  });
});
