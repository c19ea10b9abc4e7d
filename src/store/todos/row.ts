import { randomUUID } from 'node:crypto';
import { rfc3339 } from '../../domain/time.ts';

export type TodoState = 'pending' | 'claimed' | 'done' | 'failed';
export const TODO_STATES: readonly TodoState[] = ['pending', 'claimed', 'done', 'failed'];

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
  ring_attempts: number;
  synthetic: boolean;
  claimed_session_id: string | null;
  lease_token_hash: string | null;
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
}

export function summarizeTodo(t: TodoRow): TodoSummary {
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
  return out;
}

/** The full form handed over at claim time: the summary plus the payload. */
export function fullTodo(t: TodoRow): TodoSummary & { payload: unknown } {
  return { ...summarizeTodo(t), payload: t.payload };
}

export const newTodoId = (): string => `td_${randomUUID()}`;

/** Row changes of a background sweep: which endpoints and queues it moved. */
export interface Moved {
  id: string;
  endpoint_id: string;
  queue: string;
  state: TodoState;
}
