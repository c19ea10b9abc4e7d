import type { Sql, TxSql } from '../../db/connect.ts';
import { conflict, forbidden, notFound, type SwitchboardError } from '../../domain/errors.ts';
import { RESERVED_QUEUE } from '../../domain/scope.ts';
import { getTodo } from './reads.ts';
import type { TodoRow } from './row.ts';

// Agent transitions take the caller's endpoint and allowed queues; a todo of another endpoint is
// indistinguishable from one that never existed.

export interface Caller {
  endpointId: string;
  /** `agent:<agent_id>`: every session of one agent acts as the same owner. */
  owner: string;
  /** The granted queues (or, in a statement composed once, an `arg` standing for them). */
  queues: readonly string[];
  /** The MCP session acting, recorded on the claims it makes. */
  sessionId?: string | null;
}

/**
 * The caller's reach in one predicate: its endpoint, its granted queues, never the reserved queue,
 * and no self-test todo unless the path opts in (only a claim by id does).
 */
export const withinReach = (sql: Sql | TxSql, caller: Caller, id: string, opts: { includeSynthetic?: boolean } = {}) => sql`
  id = ${id} and endpoint_id = ${caller.endpointId} ${opts.includeSynthetic ? sql`` : sql`and not synthetic`}
  and queue = any(${Array.isArray(caller.queues) ? sql.array([...caller.queues]) : caller.queues}::text[]) and queue <> ${RESERVED_QUEUE}`;

/**
 * Explains why a conditional update on `id` touched nothing, probing only within the caller's
 * endpoint: missing (or another endpoint's) → not_found, queue not granted → forbidden, otherwise
 * the todo exists but is in the wrong state → the conflict the caller describes, carrying `state`.
 */
export async function refusal(
  sql: Sql | TxSql,
  caller: Caller,
  id: string,
  describeConflict: (t: TodoRow) => string,
  opts: { includeSynthetic?: boolean } = {},
): Promise<SwitchboardError> {
  const row = await getTodo(sql, caller.endpointId, id, opts);
  if (!row) return notFound(`no todo ${id} on this endpoint`);
  if (!caller.queues.includes(row.queue)) return forbidden(`todo ${id} is in queue "${row.queue}", which this endpoint is not granted`);
  return conflict(describeConflict(row), { state: row.state });
}
