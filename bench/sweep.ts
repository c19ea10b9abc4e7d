/**
 * Background-loop cost at scale: 200,000 pending todos over 10,000 endpoints (shifts on half of
 * them). Times one heartbeat sweep (charging at most 3 due todos among 1,000 receivers) and one
 * presence evaluator pass, beside a plain count of the same todos as the baseline, and prints the
 * sweep's EXPLAIN so index use is visible. Both loops write (the sweep charges rings, the pass
 * records transitions) on one connection, so each pass is also given in pgbench's single-client
 * commit latency on the same cluster: how many single-row commits it costs as much as.
 *
 *   npm run bench:sweep -- [--todos 200000] [--endpoints 10000] [--pgbench-seconds 3]
 */
import os from 'node:os';
import { parseArgs } from 'node:util';
import { ManualClock } from '../src/lib/clock.ts';
import { newStandalonePresence } from '../src/services/presence.ts';
import { createLogger } from '../src/lib/log.ts';
import { chargeDueRingsUnscoped } from '../src/store/todos/index.ts';
import { addHuman } from '../src/store/humans.ts';
import { capturingPool, explainAnalyze, pgbenchInsertRate, printPlan, summarize, withBenchDatabase } from './lib.ts';

const { values } = parseArgs({
  options: { todos: { type: 'string', default: '200000' }, endpoints: { type: 'string', default: '10000' }, 'pgbench-seconds': { type: 'string', default: '3' } },
});
const TODOS = Number(values.todos);
const ENDPOINTS = Number(values.endpoints);

async function main(): Promise<void> {
  await withBenchDatabase(4, async ({ cluster, sql, pgVersion }) => {
    const human = await addHuman(sql, { handle: 'bench' });
    const [agent] = await sql`insert into agents (owner_human_id, name) values (${human.id}, 'bench') returning id`;
    const t0 = performance.now();
    await sql`
      insert into endpoints (agent_id, slug, credential_hash, credential_prefix, scope_queues, shift)
      select ${agent!.id}, 'bench-' || i, md5(i::text), 'sbk_bench', '{work}',
             case when i % 2 = 0 then 'TZ=Europe/Berlin Mon 09:00-17:00; Tue 09:00-17:00; Wed 09:00-17:00; Thu 09:00-17:00; Fri 09:00-17:00' end
      from generate_series(1, ${ENDPOINTS}) i`;
    const [ev] = await sql`insert into events (source, family, trust_mode, verified) values ('operator', 'operator', 'operator', true) returning id`;
    await sql`
      insert into todos (id, endpoint_id, queue, source, title, event_id, created_at, updated_at)
      select 'td_' || gen_random_uuid(), e.id, 'work', 'operator', 'job', ${ev!.id},
             now() - interval '2 hours' + (g % 3600) * interval '1 second', now()
      from generate_series(1, ${TODOS}) g,
           (select array_agg(id order by id) as ids from endpoints) all_endpoints,
           lateral (select all_endpoints.ids[1 + g % ${ENDPOINTS}] as id) e`;
    await sql`analyze`;
    const loadSeconds = (performance.now() - t0) / 1000;

    const receivers = (await sql<{ id: string }[]>`select id from endpoints order by id limit 1000`).map((r) => r.id);
    const now = new Date();
    let start = performance.now();
    await sql`select count(*) from todos where state = 'pending'`;
    const countMs = performance.now() - start;
    // The timed passes run on a pool that records their statements, to EXPLAIN exactly those.
    const sweepPool = capturingPool(cluster.url);
    await sweepPool.sql`select 1`;
    sweepPool.statements.length = 0;
    start = performance.now();
    const charged = await chargeDueRingsUnscoped(sweepPool.sql, receivers, now);
    const sweepMs = performance.now() - start;
    const sweepStatements = sweepPool.statements.filter((st) => /\btodos\b/.test(st.query));

    const clock = new ManualClock('2026-10-26T07:00:00Z');
    const passPool = capturingPool(cluster.url);
    const presence = newStandalonePresence({ sql: passPool.sql, clock, log: createLogger('silent') });
    await presence.evaluate();
    clock.set('2026-10-26T08:00:00Z'); // 09:00 in Berlin: half the endpoints come in
    passPool.statements.length = 0;
    start = performance.now();
    const transitions = await presence.evaluate();
    const evaluatorMs = performance.now() - start;
    const passStatements = passPool.statements.filter((st) => /\bendpoints\b/.test(st.query));

    const pg1 = await pgbenchInsertRate(cluster, 1, Number(values['pgbench-seconds']));
    const commits = (ms: number) => `${Math.round(ms / pg1.latencyMs).toLocaleString('en')} commits`;

    console.log(`cores ${os.availableParallelism()}, PostgreSQL ${pgVersion}, ${TODOS} pending todos over ${ENDPOINTS} endpoints (loaded in ${loadSeconds.toFixed(1)} s)`);
    console.table([
      { measure: 'baseline: count(*) of pending todos', ms: +countMs.toFixed(1), 'vs count(*)': '1.0x', 'as pgbench single-row commits': '' },
      { measure: `one heartbeat sweep over 1,000 receivers (charged ${charged.length})`, ms: +sweepMs.toFixed(1), 'vs count(*)': `${(sweepMs / countMs).toFixed(2)}x`, 'as pgbench single-row commits': commits(sweepMs) },
      { measure: `one presence evaluator pass (${transitions} transitions)`, ms: +evaluatorMs.toFixed(1), 'vs count(*)': `${(evaluatorMs / countMs).toFixed(2)}x`, 'as pgbench single-row commits': commits(evaluatorMs) },
    ]);
    console.log(`pgbench single-row insert, one client (${pg1.command}): ${pg1.latencyMs.toFixed(3)} ms per commit. Both loops run every 30 s.`);
    summarize('sweep', pgVersion, [
      {
        figure: `heartbeat sweep, ${TODOS.toLocaleString('en')} pending over ${ENDPOINTS.toLocaleString('en')} endpoints, 1,000 receivers`,
        value: `${sweepMs.toFixed(1)} ms (count(*) ${countMs.toFixed(1)} ms), charged ${charged.length}`,
        vsPgbench: `= ${commits(sweepMs)} (${pg1.latencyMs.toFixed(3)} ms each)`,
      },
      {
        figure: `presence evaluator pass, ${ENDPOINTS.toLocaleString('en')} endpoints`,
        value: `${evaluatorMs.toFixed(1)} ms, ${transitions} transitions`,
        vsPgbench: `= ${commits(evaluatorMs)}`,
      },
    ]);
    // Plans of the statements the timed passes sent, re-run under EXPLAIN ANALYZE and rolled back.
    for (const [i, st] of sweepStatements.entries()) {
      printPlan(`Sweep statement ${i + 1} of ${sweepStatements.length} (EXPLAIN ANALYZE, rolled back):`, await explainAnalyze(sweepPool.sql, st));
    }
    for (const [i, st] of passStatements.entries()) {
      printPlan(`Presence pass statement ${i + 1} of ${passStatements.length} (EXPLAIN ANALYZE, rolled back):`, await explainAnalyze(passPool.sql, st));
    }
    await sweepPool.sql.end({ timeout: 5 });
    await passPool.sql.end({ timeout: 5 });
  });
}

await main();
