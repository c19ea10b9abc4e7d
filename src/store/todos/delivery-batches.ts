import type { Sql } from '../../db/connect.ts';
import { Batches, pipelinedRuns, type Waiting } from '../../lib/batches.ts';
import { Lanes } from '../../lib/lanes.ts';
import { replayWindowMs } from '../event-insert.ts';
import { insertDeliveries, type ProducedTodo, type Inserted } from './insert.ts';

/** The most deliveries one statement takes for the pushes that waited while one ran. */
export const MAX_DELIVERIES_PER_STATEMENT = 16;

/**
 * The delivery insert for an instance's pushes (webhook deliveries and operators' pushes alike).
 * A push with none of its kind running goes to the database at once, alone; the pushes to the
 * same endpoint that arrive while it runs wait for it and then go together in one statement (up
 * to MAX_DELIVERIES_PER_STATEMENT; once half that many wait, that statement is sent behind the one
 * going, on the kind's lane: pipelinedRuns), each written, refused or collapsed onto a live todo
 * as it would be alone (insertDeliveries). Under load that spends one statement's round trip, commit and
 * executor set-up on many deliveries instead of one each (docs/performance.md, ingest).
 *
 * Two pushes with the same signed body or the same idempotency key never share a statement: the
 * later waits for the next one, where it finds the first's key taken, as it would have alone. A
 * statement that fails (one row PostgreSQL refuses) fails no push by itself: each of its pushes
 * then goes again alone (Batches), so only the one at fault gets the error.
 */
export class DeliveryBatches {
  readonly #batches: Batches<ProducedTodo, Inserted, Sql>;

  constructor(
    sql: Sql,
    /** The pushing instance's directory id (insertEventAndTodo's `instanceId`), read at each statement. */
    private readonly instanceId: () => string | null = () => null,
    /** Where the statements go (src/lib/lanes.ts); by default the pool. */
    lanes: Lanes<Sql> = new Lanes([sql]),
  ) {
    this.#batches = new Batches((calls, lane) => this.#insert(calls, lane), {
      ...pipelinedRuns(MAX_DELIVERIES_PER_STATEMENT),
      distinct: ({ event, todo }) => [
        event.replay && event.webhookId ? `body:${event.webhookId}:${event.replay.bodySha256.toString('hex')}` : null,
        todo.idempotencyKey ? `key:${todo.idempotencyKey}` : null,
      ],
    }, lanes);
  }

  insert(delivery: ProducedTodo): Promise<Inserted> {
    // One statement's rows share an endpoint and a replay window (insertDeliveries).
    const kind = `${delivery.todo.endpointId}:${replayWindowMs(delivery.event, delivery.now)}`;
    return this.#batches.add(kind, delivery);
  }

  async #insert(calls: Waiting<ProducedTodo, Inserted>[], lane: Sql): Promise<void> {
    const inserted = await insertDeliveries(lane, calls.map((c) => c.item), this.instanceId());
    calls.forEach((c, i) => c.resolve(inserted[i]!));
  }
}
