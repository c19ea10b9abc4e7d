import { randomUUID } from 'node:crypto';
import type { RouteTrace } from '../../domain/routing/route.ts';
import { rfc3339 } from '../../domain/time.ts';

export type TodoState = 'pending' | 'claimed' | 'done' | 'failed' | 'canceled';
export const TODO_STATES: readonly TodoState[] = ['pending', 'claimed', 'done', 'failed', 'canceled'];

/** What a listing may filter on: a state, or `dead` (failed with no retry to come: a dead letter). */
export type TodoStateFilter = TodoState | 'dead';
export const TODO_STATE_FILTERS: readonly TodoStateFilter[] = [...TODO_STATES, 'dead'];

/** A dead letter: failed, and no retry is coming. */
export const isDead = (t: Pick<TodoRow, 'state' | 'next_retry_at'>): boolean => t.state === 'failed' && t.next_retry_at === null;

export interface TodoRow {
  id: string;
  endpoint_id: string;
  queue: string;
  source: string | null;
  kind: string | null;
  title: string;
  payload: unknown;
  payload_size: number;
  event_id: string | null;
  idempotency_key: string | null;
  assignee: string | null;
  state: TodoState;
  owner: string | null;
  lease_expires_at: Date | null;
  attempt: number;
  max_attempts: number;
  result: unknown;
  created_at: Date;
  updated_at: Date;
  claimed_at: Date | null;
  completed_at: Date | null;
  next_retry_at: Date | null;
  last_ringed_at: Date | null;
  /** How it was last announced since it became ready (store/todos/announce.ts). */
  last_ringed_by: 'ring' | 'digest' | null;
  ring_attempts: number;
  synthetic: boolean;
  claimed_session_id: string | null;
  lease_token_hash: string | null;
  /** Higher is claimed first (-1000..1000, default 0). */
  priority: number;
  /** A delayed todo's due time while it waits (pending); null once due. */
  run_at: Date | null;
  /** Why it exists: the routing trace of the delivery that made it (domain/routing/route.ts), or null. */
  routing: unknown;
}

/** The columns a TodoRow is read from (the table's, less `seq`): for a statement that reads all but some. */
export const TODO_ROW_COLUMNS = [
  'id', 'endpoint_id', 'queue', 'source', 'kind', 'title', 'payload', 'payload_size', 'event_id', 'idempotency_key',
  'assignee', 'state', 'owner', 'lease_expires_at', 'attempt', 'max_attempts', 'result', 'created_at', 'updated_at',
  'claimed_at', 'completed_at', 'next_retry_at', 'last_ringed_at', 'last_ringed_by', 'ring_attempts', 'synthetic', 'claimed_session_id',
  'lease_token_hash', 'priority', 'run_at', 'routing',
] as const satisfies readonly (keyof TodoRow)[];

// Every field of TodoRow has its column above (a field added to one and not the other fails to compile).
type Unlisted = Exclude<keyof TodoRow, (typeof TODO_ROW_COLUMNS)[number]>;
const everyFieldListed: Unlisted extends never ? true : Unlisted = true;
void everyFieldListed;

/**
 * A todo without its payload: what every read that does not hand the payload over takes (the
 * answers to heartbeat, complete, fail and release, listings, the doorbell's picks). For a
 * webhook's todo the payload is the delivery's body, tens of KiB that PostgreSQL would read from
 * TOAST and send, and the driver parse, for nothing.
 */
export type TodoMetaRow = Omit<TodoRow, 'payload'>;

const metaColumnLists = new Map<string, string>();

/** The columns of a TodoMetaRow on `alias` (event_id as text, as TodoRow reads it). */
export function todoMetaColumns(alias: string): string {
  let list = metaColumnLists.get(alias);
  if (list === undefined) {
    list = TODO_ROW_COLUMNS.filter((c) => c !== 'payload')
      .map((c) => (c === 'event_id' ? `${alias}.event_id::text as event_id` : `${alias}.${c}`))
      .join(', ');
    metaColumnLists.set(alias, list);
  }
  return list;
}

/** The compact wire form: everything a listing needs, never the payload. */
export interface TodoSummary {
  id: string;
  queue: string;
  source?: string;
  kind?: string;
  title: string;
  state: TodoState;
  owner?: string;
  assignee?: string;
  attempt: number;
  max_attempts: number;
  lease_expires_at?: string;
  next_retry_at?: string;
  created_at: string;
  payload_size: number;
  /** Only when not 0. */
  priority?: number;
  /** Only while a delayed todo waits. */
  run_at?: string;
  /** Only on a dead letter. */
  dead?: true;
}

export function summarizeTodo(t: TodoMetaRow): TodoSummary {
  const out: TodoSummary = {
    id: t.id,
    queue: t.queue,
    title: t.title,
    state: t.state,
    attempt: t.attempt,
    max_attempts: t.max_attempts,
    created_at: rfc3339(t.created_at),
    payload_size: t.payload_size,
  };
  if (t.source) out.source = t.source;
  if (t.kind) out.kind = t.kind;
  if (t.owner) out.owner = t.owner;
  if (t.assignee) out.assignee = t.assignee;
  if (t.state === 'claimed' && t.lease_expires_at) out.lease_expires_at = rfc3339(t.lease_expires_at);
  if (t.state === 'failed' && t.next_retry_at) out.next_retry_at = rfc3339(t.next_retry_at);
  if (t.priority) out.priority = t.priority;
  if (t.state === 'pending' && t.run_at) out.run_at = rfc3339(t.run_at);
  if (isDead(t)) out.dead = true;
  return out;
}

/** The full form handed over at claim time: the summary plus the payload. */
export function fullTodo(t: TodoRow): TodoSummary & { payload: unknown } {
  return { ...summarizeTodo(t), payload: t.payload };
}

/** One todo in full, for its owner: every lifecycle field, the payload and the result. */
export interface TodoDetail extends Omit<TodoSummary, 'priority' | 'run_at' | 'dead' | 'next_retry_at' | 'lease_expires_at'> {
  endpoint_id: string;
  priority: number;
  /** While a delayed todo waits: when it becomes claimable; null otherwise. */
  run_at: string | null;
  /** A dead letter: failed, no retry coming. */
  dead: boolean;
  next_retry_at: string | null;
  lease_expires_at: string | null;
  claimed_at: string | null;
  completed_at: string | null;
  updated_at: string;
  payload: unknown;
  result: unknown;
  /** Why it exists: the routing trace of the webhook delivery that made it; null for an operator's push. */
  routing: RouteTrace | null;
}

/** The stored routing trace (written only from a RouteTrace), or null. */
export const routingOf = (t: Pick<TodoRow, 'routing'>): RouteTrace | null => (t.routing ?? null) as RouteTrace | null;

export function detailTodo(t: TodoRow): TodoDetail {
  const { priority: _p, run_at: _r, dead: _d, next_retry_at: _n, lease_expires_at: _l, ...summary } = summarizeTodo(t);
  return {
    ...summary,
    endpoint_id: t.endpoint_id,
    priority: t.priority,
    run_at: t.state === 'pending' ? (rfc3339(t.run_at) ?? null) : null,
    dead: isDead(t),
    next_retry_at: rfc3339(t.next_retry_at) ?? null,
    lease_expires_at: t.state === 'claimed' ? (rfc3339(t.lease_expires_at) ?? null) : null,
    claimed_at: rfc3339(t.claimed_at) ?? null,
    completed_at: rfc3339(t.completed_at) ?? null,
    updated_at: rfc3339(t.updated_at),
    payload: t.payload,
    result: t.result ?? null,
    routing: routingOf(t),
  };
}

export const newTodoId = (): string => `td_${randomUUID()}`;

/** Row changes of a background sweep: which endpoints and queues it moved. */
export interface Moved {
  id: string;
  endpoint_id: string;
  queue: string;
  state: TodoState;
}
