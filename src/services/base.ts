import type { Sql } from '../db/connect.ts';
import type { Lanes } from '../lib/lanes.ts';
import type { Clock } from '../lib/clock.ts';
import type { Logger } from '../lib/log.ts';

/** What every service is built on: the pool, the injected clock and the logger. */
export interface ServiceBase {
  sql: Sql;
  /** The connections batched statements keep to (src/lib/lanes.ts); absent: the pool. */
  lanes?: Lanes<Sql>;
  clock: Clock;
  log: Logger;
}
