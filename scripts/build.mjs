#!/usr/bin/env node
// `npm run build` (and `npm pack`, through prepack): compiles src/ to dist/ with tsc
// (tsconfig.build.json: .ts import specifiers rewritten to .js, source maps with their sources
// inlined, tests left out) and copies every file of src/ that is not TypeScript (the SQL
// migrations, the board's static assets) to the same place under dist/, so code that finds them
// relative to its own module (new URL('./migrations/', import.meta.url)) finds them from either tree.
//
// `--out-dir DIR` (relative to the checkout, one level deep, as dist/ is) builds elsewhere: the
// package test compiles into a scratch directory so a running suite never sees dist/ change.
//
// dist/.built is stamped with the time the build started: bin/switchboard.js in a checkout runs
// dist/ only while no file under src/ is newer than that, so an edited source is never shadowed by
// an old build.
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, readdirSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '..');
const src = path.join(root, 'src');
const outArg = process.argv.indexOf('--out-dir');
const dist = path.join(root, outArg === -1 ? 'dist' : process.argv[outArg + 1] ?? '');
if (path.dirname(dist) !== root) {
  console.error('build: --out-dir must name a directory directly inside the checkout (the build finds package.json at ../)');
  process.exit(2);
}
const started = new Date();

rmSync(dist, { recursive: true, force: true });
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
const result = spawnSync(process.execPath, [tsc, '-p', path.join(root, 'tsconfig.build.json'), '--outDir', dist], { stdio: 'inherit' });
if (result.status !== 0) {
  console.error(`build: tsc failed (exit ${result.status ?? result.signal})`);
  process.exit(1);
}

let copied = 0;
for (const entry of readdirSync(src, { recursive: true, withFileTypes: true })) {
  if (!entry.isFile() || entry.name.endsWith('.ts')) continue;
  const from = path.join(entry.parentPath ?? entry.path, entry.name);
  const to = path.join(dist, path.relative(src, from));
  mkdirSync(path.dirname(to), { recursive: true });
  copyFileSync(from, to);
  copied++;
}

const stamp = path.join(dist, '.built');
writeFileSync(stamp, `${started.toISOString()}\n`);
utimesSync(stamp, started, started);
console.log(`build: ${path.relative(root, dist)}/ written (tsc, ${copied} assets copied)`);
