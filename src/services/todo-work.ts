import { createHash, randomBytes } from 'node:crypto';
import { forbidden, notFound } from '../domain/errors.ts';
import { LIST_DEFAULT_LIMIT, leaseSeconds } from '../domain/lifecycle.ts';
import { rfc3339 } from '../domain/time.ts';
import {
  claimNextTodo,
  claimOwnTestTodo,
  claimTodo,
  completeTodo,
  failTodo,
  fullTodo,
  getTodo,
  heartbeatTodo,
  listTodos,
  releaseTodo,
  summarizeTodo,
  type Caller,
  type ClaimedTodo,
  type TodoRow,
  type TodoState,
} from '../store/todos/index.ts';
import type { ServiceBase } from './base.ts';

/** The agent working a queue: its endpoint, its agent, its granted queues and the session acting. */
export interface Worker {
  endpointId: string;
  agentId: string;
  queues: readonly string[];
  sessionId: string;
}

export interface LeaseOptions {
  /** Absent or <= 0 means the default lease; capped by the lifecycle rules. */
  leaseTtlSeconds?: number;
  /** Mint a lease token that every later transition must present. */
  requireFence?: boolean;
}

const callerOf = (w: Worker): Caller => ({ endpointId: w.endpointId, owner: `agent:${w.agentId}`, queues: w.queues, sessionId: w.sessionId });

const hashToken = (t: string | undefined): string | null => (t === undefined ? null : createHash('sha256').update(t).digest('hex'));

/** A fresh fence: the token goes to the claimer once, only its hash is stored. */
function mintFence(required: boolean | undefined): { token?: string; hash: string | null } {
  if (!required) return { hash: null };
  const token = randomBytes(16).toString('base64url');
  return { token, hash: hashToken(token) };
}

const selfTestView = (row: TodoRow) => ({
  ...fullTodo(row),
  self_test: true,
  note: 'This was a Switchboard self-test todo: your claim completed it. No other action is needed.',
});

function withFailureFields(t: TodoRow) {
  return {
    ...summarizeTodo(t),
    next_retry_at: rfc3339(t.next_retry_at) ?? null,
    dead_letter: t.state === 'failed' && t.next_retry_at === null,
  };
}

/**
 * What an agent does with todos on its own queues: list, read, claim (by id or the next one),
 * heartbeat, and end a claim (complete, fail, release). Results are the agent-facing views; a
 * claim also returns the doorbell rings it acknowledged, for the caller's session to count.
 */
export class TodoWork {
  constructor(private readonly base: ServiceBase) {}

  /** The one queue asked for, if granted, else every granted queue. */
  #queues(w: Worker, queue: string | undefined): readonly string[] {
    if (queue === undefined) return w.queues;
    if (!w.queues.includes(queue)) throw forbidden(`queue "${queue}" is not granted to this endpoint`);
    return [queue];
  }

  async list(w: Worker, f: { queue?: string; state?: TodoState; limit?: number; includeSynthetic?: boolean }) {
    const rows = await listTodos(this.base.sql, w.endpointId, {
      queues: this.#queues(w, f.queue),
      state: f.state,
      limit: f.limit ?? LIST_DEFAULT_LIMIT,
      includeSynthetic: f.includeSynthetic === true,
    });
    return { todos: rows.map(summarizeTodo) };
  }

  async get(w: Worker, id: string) {
    const row = await getTodo(this.base.sql, w.endpointId, id);
    if (!row || !w.queues.includes(row.queue)) throw notFound(`no todo ${id} on this endpoint`);
    return { ...withFailureFields(row), payload: row.payload, result: row.result ?? null };
  }

  async claim(w: Worker, id: string, opts: LeaseOptions) {
    const fence = mintFence(opts.requireFence);
    const row = await claimTodo(this.base.sql, callerOf(w), id, leaseSeconds(opts.leaseTtlSeconds), this.base.clock.now(), fence.hash);
    const view = row.synthetic
      ? selfTestView(row)
      : fence.token
        ? { ...fullTodo(row), lease_token: fence.token }
        : fullTodo(row);
    return { view, ackedRings: row.acked_rings };
  }

  /**
   * The claim of one's own self-test todo, which needs no claim grant (by id, or the rung one when
   * `id` is null); null when the caller has no such todo, for the verb to refuse as not granted.
   */
  async claimOwnTest(w: Worker, id: string | null, queue?: string) {
    const row = await this.#claimOwnTest(w, id, this.#queues(w, queue));
    if (!row) return null;
    return { view: id === null ? { empty: false, todo: selfTestView(row) } : selfTestView(row), ackedRings: row.acked_rings };
  }

  #claimOwnTest(w: Worker, id: string | null, queues: readonly string[]): Promise<ClaimedTodo | null> {
    return claimOwnTestTodo(this.base.sql, callerOf(w), queues, this.base.clock.now(), id);
  }

  /** The next todo: a self-test todo whose doorbell rang comes before real work. */
  async claimNext(w: Worker, queue: string | undefined, opts: LeaseOptions) {
    const queues = this.#queues(w, queue);
    const test = await this.#claimOwnTest(w, null, queues);
    if (test) return { view: { empty: false, todo: selfTestView(test) }, ackedRings: test.acked_rings };
    const fence = mintFence(opts.requireFence);
    const row = await claimNextTodo(this.base.sql, callerOf(w), queues, leaseSeconds(opts.leaseTtlSeconds), this.base.clock.now(), fence.hash);
    if (!row) return { view: { empty: true }, ackedRings: null };
    const view = fence.token ? { empty: false, todo: fullTodo(row), lease_token: fence.token } : { empty: false, todo: fullTodo(row) };
    return { view, ackedRings: row.acked_rings };
  }

  async heartbeat(w: Worker, id: string, leaseTtlSeconds: number | undefined, leaseToken: string | undefined) {
    return summarizeTodo(await heartbeatTodo(this.base.sql, callerOf(w), id, leaseSeconds(leaseTtlSeconds), this.base.clock.now(), hashToken(leaseToken)));
  }

  async complete(w: Worker, id: string, result: unknown, leaseToken: string | undefined) {
    return summarizeTodo(await completeTodo(this.base.sql, callerOf(w), id, result, this.base.clock.now(), hashToken(leaseToken)));
  }

  async fail(w: Worker, id: string, result: unknown, leaseToken: string | undefined) {
    return withFailureFields(await failTodo(this.base.sql, callerOf(w), id, result, this.base.clock.now(), hashToken(leaseToken)));
  }

  async release(w: Worker, id: string, leaseToken: string | undefined) {
    return summarizeTodo(await releaseTodo(this.base.sql, callerOf(w), id, this.base.clock.now(), hashToken(leaseToken)));
  }
}
