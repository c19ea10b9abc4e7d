#!/usr/bin/env node
// The `switchboard` command. An installed package runs the JavaScript build (dist/, made by
// `npm run build`, which `npm pack` runs): plain Node, no TypeScript at run time. A checkout runs
// its TypeScript sources through tsx, so `npm start` needs no build step; it runs dist/ only while
// that build is newer than every file under src/, so an edited source never loses to a stale build.
import { existsSync, readdirSync, statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const built = new URL('../dist/cli/main.js', import.meta.url);

function buildIsCurrent() {
  if (!existsSync(built)) return false;
  const sources = `${root}src`;
  if (!existsSync(sources)) return true; // an installed package: dist/ is all there is
  const stamp = statSync(`${root}dist/.built`, { throwIfNoEntry: false });
  if (!stamp) return false;
  for (const entry of readdirSync(sources, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile() && !entry.isDirectory()) continue;
    if (statSync(`${entry.parentPath ?? entry.path}/${entry.name}`).mtimeMs > stamp.mtimeMs) return false;
  }
  return true;
}

let main;
if (buildIsCurrent()) {
  process.setSourceMapsEnabled(true);
  ({ main } = await import(built.href));
} else {
  const { register } = await import('tsx/esm/api');
  register();
  ({ main } = await import('../src/cli/main.ts'));
}
const code = await main(process.argv);
// Every command has finished when main returns (serve and bridge return only once they stopped):
// exit once the output is flushed, rather than wait for fetch's idle keep-alive socket to close
// (about 180 ms of every client command).
await Promise.all([process.stdout, process.stderr].map((stream) => new Promise((resolve) => stream.write('', resolve))));
process.exit(code);
