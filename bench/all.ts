/**
 * The benchmark suite: runs every bench script in turn, each in its own process on its own
 * throwaway PostgreSQL, prints what each printed, then one table of the headline figures (each
 * bench hands them over as a `##summary` line, see summarize() in lib.ts), and writes the lot to
 * bench/results/<date>.json. Peers need `npm --prefix bench ci`, which `npm run bench` runs first.
 *
 *   npm run bench            (about 5 minutes on 2 cores, 2.5 of them pg-boss draining 20,000 jobs)
 *
 * The claim drain runs inside peers (store, MCP over HTTP, pg-boss, graphile-worker at 20,000 jobs
 * each; the SDK client, node:http, bare HTTP and pg-boss again on a 1,000-job queue); bench/mcp-claim.ts stays a
 * standalone script.
 */
import { spawn } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import { SUMMARY_MARK, type SummaryRow } from './lib.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const TSX = `${ROOT}node_modules/tsx/dist/cli.mjs`;
const SUITE: { name: string; args: string[]; node?: string[] }[] = [
  { name: 'peers', args: ['bench/peers.ts', '--jobs', '20000', '--workers', '8', '--pings', '200', '--sdk-jobs', '1000', '--pgbench-seconds', '2'] },
  { name: 'doorbell-latency', args: ['bench/doorbell-latency.ts', '--todos', '600', '--pgbench-seconds', '2'] },
  { name: 'sessions', args: ['bench/sessions.ts'], node: ['--expose-gc'] },
  { name: 'sweep', args: ['bench/sweep.ts'] },
  { name: 'presence', args: ['bench/presence.ts'] },
  { name: 'ingest', args: ['bench/ingest.ts', '--seconds', '6', '--pgbench-seconds', '2'] },
];

interface Summary {
  bench: string;
  cores: number;
  pgVersion: string;
  rows: SummaryRow[];
}

function run(node: string[], args: string[]): Promise<{ code: number | null; output: string; summaries: Summary[]; seconds: number }> {
  const started = performance.now();
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [...node, TSX, ...args], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, SWITCHBOARD_BENCH_SUMMARY: '1' },
    });
    let output = '';
    let pending = '';
    const summaries: Summary[] = [];
    child.stdout.on('data', (d: Buffer) => {
      pending += d.toString('utf8');
      let nl;
      while ((nl = pending.indexOf('\n')) >= 0) {
        const line = pending.slice(0, nl + 1);
        pending = pending.slice(nl + 1);
        if (line.startsWith(SUMMARY_MARK)) {
          summaries.push(JSON.parse(line.slice(SUMMARY_MARK.length)) as Summary);
          continue;
        }
        output += line;
        process.stdout.write(line);
      }
    });
    child.stderr.on('data', (d) => process.stderr.write(d));
    child.on('close', (code) => {
      output += pending;
      process.stdout.write(pending);
      resolve({ code, output, summaries, seconds: (performance.now() - started) / 1000 });
    });
  });
}

const started = performance.now();
const at = new Date();
const loadBefore = os.loadavg();
const results: Record<string, { exit: number | null; seconds: number; output: string; summary: SummaryRow[] }> = {};
const summaries: Summary[] = [];
for (const b of SUITE) {
  console.log(`\n=== ${b.name} ===`);
  const r = await run(b.node ?? [], b.args);
  results[b.name] = { exit: r.code, seconds: Math.round(r.seconds), output: r.output, summary: r.summaries.flatMap((s) => s.rows) };
  summaries.push(...r.summaries);
}
const totalSeconds = Math.round((performance.now() - started) / 1000);

const pgVersions = [...new Set(summaries.map((s) => s.pgVersion))];
const header =
  `cores ${os.availableParallelism()}, PostgreSQL ${pgVersions.join(' / ') || 'unknown'}, Node ${process.version}; ` +
  `${SUITE.length} benches in ${totalSeconds} s; load average ${loadBefore.map((l) => l.toFixed(1)).join(' ')} before, ` +
  `${os.loadavg().map((l) => l.toFixed(1)).join(' ')} after`;
console.log(`\n=== summary ===\n${header}`);
console.table(
  summaries.flatMap((s) =>
    s.rows.map((r) => ({
      bench: s.bench,
      figure: r.figure,
      value: r.value,
      'vs pgbench (same cluster)': r.vsPgbench ?? '',
      target: r.target ?? '',
      met: r.met === undefined ? '' : r.met ? 'yes' : 'NO',
    })),
  ),
);
const missing = SUITE.filter((b) => !summaries.some((s) => s.bench === b.name)).map((b) => b.name);
if (missing.length) console.log(`no figures from: ${missing.join(', ')}`);

await mkdir(`${ROOT}bench/results`, { recursive: true });
const file = `${ROOT}bench/results/${at.toISOString().slice(0, 10)}.json`;
await writeFile(
  file,
  `${JSON.stringify(
    {
      at: at.toISOString(),
      cores: os.availableParallelism(),
      memoryGiB: Math.round(os.totalmem() / 2 ** 30),
      node: process.version,
      postgres: pgVersions,
      loadAverageBefore: loadBefore,
      loadAverageAfter: os.loadavg(),
      totalSeconds,
      results,
    },
    null,
    2,
  )}\n`,
);
console.log(`\nwrote ${file}`);
const failed = Object.entries(results).filter(([, r]) => r.exit !== 0);
if (failed.length) {
  console.log(`failed: ${failed.map(([n]) => n).join(', ')}`);
  process.exitCode = 1;
}
