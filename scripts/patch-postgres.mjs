#!/usr/bin/env node
// Run by `npm install` / `npm ci` (postinstall). Repairs a defect of the `postgres` driver
// (porsager/postgres 3.4.9, the latest release) that the fault suite hit when PostgreSQL restarts
// under load (docs/reliability.md, section 2):
//
// Small writes are flushed from a setImmediate. When a connection closes with such a flush
// pending, closed()/terminate() cancel the immediate but leave `nextWriteTimer` set and `chunk`
// full, so that connection never flushes again: after it reconnects its startup message is
// never sent and every query given to it hangs until connect_timeout (30 s), for good. And when
// the flush does run after the socket is gone, `socket.write` on null throws from the immediate:
// an uncaught exception that ends the process.
// Upstream: porsager/postgres#1066, #1154, #1208 (fixes proposed in #1168, #1176, #1209).
//
// The repair, in each build of connection.js: reset `chunk` and `nextWriteTimer` where the
// flush is cancelled, and let a flush with no socket drop its bytes (their query was already
// rejected with CONNECTION_CLOSED). Idempotent; a version it does not recognise is left alone
// with a warning (the fault suite shows whether the defect is still there).
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

const MARK = '/* switchboard: flush state reset on close */';
const edits = [
  [
    '  function nextWrite(fn) {\n    const x = socket.write(chunk, fn)',
    `  function nextWrite(fn) {\n    if (!socket) { ${MARK}\n      nextWriteTimer !== null && clearImmediate(nextWriteTimer)\n      chunk = nextWriteTimer = null\n      return false\n    }\n    const x = socket.write(chunk, fn)`,
  ],
  // terminate()
  ['    clearImmediate(nextWriteTimer)\n    if (socket) {', '    clearImmediate(nextWriteTimer)\n    chunk = nextWriteTimer = null\n    if (socket) {'],
  // closed()
  [
    '    clearImmediate(nextWriteTimer)\n    socket.removeListener(',
    '    clearImmediate(nextWriteTimer)\n    chunk = nextWriteTimer = null\n    socket.removeListener(',
  ],
];

let root;
try {
  // The package exports no ./package.json; its require entry is cjs/src/index.js.
  root = path.resolve(path.dirname(createRequire(import.meta.url).resolve('postgres')), '..', '..');
} catch {
  process.exit(0); // not installed (yet): nothing to repair
}
const { version } = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8'));
for (const build of ['src', 'cjs/src', 'cf/src']) {
  const file = path.join(root, build, 'connection.js');
  let text;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    continue;
  }
  if (text.includes(MARK)) continue;
  const missing = edits.filter(([from]) => text.split(from).length !== 2);
  if (missing.length > 0) {
    console.warn(`patch-postgres: postgres ${version} ${build}/connection.js is not the code this repair was written for; left as is`);
    continue;
  }
  for (const [from, to] of edits) text = text.replace(from, to);
  writeFileSync(file, text);
  console.log(`patch-postgres: repaired postgres ${version} ${build}/connection.js (flush state reset on close)`);
}
