import type { Sql } from '../db/connect.ts';
import type { Clock } from '../lib/clock.ts';
import type { Logger } from '../lib/log.ts';

/** What every service is built on: the pool, the injected clock and the logger. */
export interface ServiceBase {
  sql: Sql;
  clock: Clock;
  log: Logger;
}
