/**
 * The benchmark suite: runs every bench script in turn, each in its own process, prints what
 * each printed, and writes the lot to bench/results/<date>.json. Peers need `npm --prefix bench ci`.
 *
 *   npm run bench            (about 5 minutes on 2 cores)
 */
import { spawn } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const TSX = `${ROOT}node_modules/tsx/dist/cli.mjs`;
const SUITE: { name: string; args: string[]; node?: string[] }[] = [
  { name: 'mcp-claim', args: ['bench/mcp-claim.ts'] },
  { name: 'peers', args: ['bench/peers.ts', '--jobs', '5000', '--pings', '200'] },
  { name: 'doorbell-latency', args: ['bench/doorbell-latency.ts'] },
  { name: 'sessions', args: ['bench/sessions.ts'], node: ['--expose-gc'] },
  { name: 'sweep', args: ['bench/sweep.ts'] },
  { name: 'presence', args: ['bench/presence.ts'] },
  { name: 'ingest', args: ['bench/ingest.ts'] },
];

function run(node: string[], args: string[]): Promise<{ code: number | null; output: string; seconds: number }> {
  const started = performance.now();
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [...node, TSX, ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d) => {
      output += d;
      process.stdout.write(d);
    });
    child.stderr.on('data', (d) => process.stderr.write(d));
    child.on('close', (code) => resolve({ code, output, seconds: (performance.now() - started) / 1000 }));
  });
}

const results: Record<string, { exit: number | null; seconds: number; output: string }> = {};
for (const b of SUITE) {
  console.log(`\n=== ${b.name} ===`);
  const r = await run(b.node ?? [], b.args);
  results[b.name] = { exit: r.code, seconds: Math.round(r.seconds), output: r.output };
}
await mkdir(`${ROOT}bench/results`, { recursive: true });
const file = `${ROOT}bench/results/${new Date().toISOString().slice(0, 10)}.json`;
await writeFile(file, `${JSON.stringify({ at: new Date().toISOString(), cores: os.availableParallelism(), node: process.version, results }, null, 2)}\n`);
console.log(`\nwrote ${file}`);
const failed = Object.entries(results).filter(([, r]) => r.exit !== 0);
if (failed.length) {
  console.log(`failed: ${failed.map(([n]) => n).join(', ')}`);
  process.exitCode = 1;
}
