/**
 * Presence cost: 10,000 endpoints with shifts in 20 zones. Times effective() per call, a quiet
 * evaluator pass (nothing changes), and a pass at an instant where shifts start or end for some
 * endpoints, on a throwaway PostgreSQL. Baseline for the pass: one plain SELECT of the same rows;
 * a pass that writes transitions is also given in pgbench single-client commits on the cluster.
 *
 *   npm run bench:presence -- [--endpoints 10000] [--pgbench-seconds 3]
 */
import os from 'node:os';
import { parseArgs } from 'node:util';
import { ManualClock } from '../src/lib/clock.ts';
import { newStandalonePresence, inputsOf } from '../src/services/presence.ts';
import { createLogger } from '../src/lib/log.ts';
import { effective, parseShift } from '../src/domain/presence/index.ts';
import { addHuman } from '../src/store/humans.ts';
import { presenceWatchlistUnscoped } from '../src/store/presence.ts';
import { pgbenchInsertRate, summarize, withBenchDatabase } from './lib.ts';

const { values } = parseArgs({ options: { endpoints: { type: 'string', default: '10000' }, 'pgbench-seconds': { type: 'string', default: '3' } } });
const N = Number(values.endpoints);
const ZONES = [
  'UTC', 'Europe/London', 'Europe/Berlin', 'Europe/Helsinki', 'Europe/Moscow', 'Asia/Dubai', 'Asia/Kolkata',
  'Asia/Kathmandu', 'Asia/Shanghai', 'Asia/Tokyo', 'Australia/Adelaide', 'Australia/Sydney', 'Australia/Lord_Howe',
  'Pacific/Auckland', 'Pacific/Honolulu', 'America/Anchorage', 'America/Los_Angeles', 'America/Denver',
  'America/New_York', 'America/Sao_Paulo',
];
const SHAPES = ['Mon-Fri 09:00-17:00', 'Mon-Fri 09:00-12:00; Mon-Fri 13:00-17:00', 'Sun-Thu 22:00-02:00', 'Sat,Sun 10:00-14:00'];

async function main(): Promise<void> {
  await withBenchDatabase(10, async ({ cluster, sql, pgVersion }) => {
    const human = await addHuman(sql, { handle: 'bench' });
    const [agent] = await sql`insert into agents (owner_human_id, name) values (${human.id}, 'bench') returning id`;
    const shifts = Array.from({ length: N }, (_, i) => parseShift(`TZ=${ZONES[i % ZONES.length]} ${SHAPES[Math.floor(i / ZONES.length) % SHAPES.length]}`).canonical);
    await sql`
      insert into endpoints (agent_id, slug, credential_hash, credential_prefix, scope_queues, shift)
      select ${agent!.id}, 'bench-' || i, md5(i::text), 'sbk_bench', '{work}', (${sql.array(shifts)}::text[])[i]
      from generate_series(1, ${N}) i`;

    // effective() per call, over the stored inputs.
    const rows = await presenceWatchlistUnscoped(sql);
    const inputs = rows.map(inputsOf);
    const at = new Date('2026-10-26T07:30:00Z');
    for (let i = 0; i < 2000; i++) effective(inputs[i % inputs.length]!, at);
    const calls = 200_000;
    let t0 = performance.now();
    for (let i = 0; i < calls; i++) effective(inputs[i % inputs.length]!, new Date(at.getTime() + (i % 10_080) * 60_000));
    const perCallUs = ((performance.now() - t0) * 1000) / calls;

    const clock = new ManualClock('2026-10-26T03:00:00Z');
    const presence = newStandalonePresence({ sql: sql, clock, log: createLogger('silent') });
    await presence.evaluate(); // settle presence_seen once
    t0 = performance.now();
    await sql`select id, shift from endpoints where state = 'active' and shift is not null`;
    const selectMs = performance.now() - t0;
    t0 = performance.now();
    const quietClaims = await presence.evaluate();
    const quietMs = performance.now() - t0;
    clock.set('2026-10-26T09:00:00Z'); // 09:00 in London and UTC: shifts start there, others do not move
    t0 = performance.now();
    const busyClaims = await presence.evaluate();
    const busyMs = performance.now() - t0;

    const pg1 = await pgbenchInsertRate(cluster, 1, Number(values['pgbench-seconds']));
    const commits = (ms: number) => `${Math.round(ms / pg1.latencyMs).toLocaleString('en')} single-row commits`;

    console.log(`cores ${os.availableParallelism()}, PostgreSQL ${pgVersion}, ${N} endpoints with shifts in ${ZONES.length} zones`);
    console.table([
      { measure: 'effective() per call', value: `${perCallUs.toFixed(2)} µs`, target: '< 20 µs' },
      { measure: 'baseline: SELECT of the same rows', value: `${selectMs.toFixed(0)} ms`, target: '' },
      { measure: `evaluator pass, quiet (${quietClaims} transitions)`, value: `${quietMs.toFixed(0)} ms (${(quietMs / selectMs).toFixed(1)}x baseline)`, target: '< 1 s' },
      { measure: `evaluator pass at 09:00 UTC (${busyClaims} transitions)`, value: `${busyMs.toFixed(0)} ms (${(busyMs / selectMs).toFixed(1)}x baseline)`, target: '< 1 s' },
    ]);
    console.log(`pgbench single-row insert, one client (${pg1.command}): ${pg1.latencyMs.toFixed(3)} ms per commit; the pass at 09:00 costs as much as ${commits(busyMs)}.`);
    summarize('presence', pgVersion, [
      { figure: 'presence: effective() per call', value: `${perCallUs.toFixed(2)} µs`, target: '< 20 µs', met: perCallUs < 20 },
      { figure: `presence: evaluator pass, quiet (${N.toLocaleString('en')} endpoints)`, value: `${quietMs.toFixed(0)} ms (${(quietMs / selectMs).toFixed(1)}x a SELECT)`, target: '< 1 s', met: quietMs < 1000 },
      {
        figure: `presence: evaluator pass, ${busyClaims} transitions`,
        value: `${busyMs.toFixed(0)} ms (${(busyMs / selectMs).toFixed(1)}x a SELECT)`,
        vsPgbench: `= ${commits(busyMs)}`,
        target: '< 1 s',
        met: busyMs < 1000,
      },
    ]);
  });
}

await main();
