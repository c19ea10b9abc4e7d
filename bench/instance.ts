/**
 * One Switchboard instance in a process of its own, for the benches that need each instance's CPU
 * apart (bench/instances.ts, bench/storm.ts): startApp on the environment's configuration
 * (SWITCHBOARD_DATABASE_URL, and SWITCHBOARD_LISTEN_DATABASE_URL behind a pooler), on a loopback
 * port, with the bench's lifts: no MCP or ingest-failure rate limit (SWITCHBOARD_INGEST_RATE lifts
 * the per-webhook one) and no background loops, as in bench:ingest and bench:claim. Prints one
 * JSON line, {"url": ...}, once it listens; SIGTERM stops it.
 *
 *   node --import tsx bench/instance.ts     (the environment as spawnInstance in bench/cluster-bench.ts sets it)
 */
import { startApp } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { systemClock } from '../src/lib/clock.ts';
import { createLogger } from '../src/lib/log.ts';

const UNLIMITED = { rate: 1e9, burst: 1e9 };

const app = await startApp({
  config: loadConfig(process.env),
  clock: systemClock,
  log: createLogger('warn', process.stderr),
  loops: false,
  ingestLimit: UNLIMITED,
  mcpLimits: { ip: UNLIMITED, endpoint: UNLIMITED },
});
process.stdout.write(`${JSON.stringify({ url: app.url })}\n`);
let stopping = false;
process.on('SIGTERM', () => {
  if (stopping) return;
  stopping = true;
  void app.stop().then(
    () => process.exit(0),
    () => process.exit(1),
  );
});
