import { createHash, randomBytes } from 'node:crypto';
import { forbidden, notFound } from '../domain/errors.ts';
import { LIST_DEFAULT_LIMIT, leaseSeconds } from '../domain/lifecycle.ts';
import { rfc3339 } from '../domain/time.ts';
import {
  ClaimNext,
  FinishThenClaim,
  claimOwnTestTodo,
  claimTodo,
  fullTodo,
  getTodo,
  HeldTransitions,
  listTodos,
  summarizeTodo,
  type Caller,
  type ClaimedTodo,
  type Finish,
  type TodoMetaRow,
  type TodoRow,
  type TodoStateFilter,
} from '../store/todos/index.ts';
import { decodeCursor, encodeCursor } from '../domain/todo-cursor.ts';
import type { ServiceBase } from './base.ts';
import { ClaimWaiters, LONG_POLL_RECHECK_MS } from './claim-waiters.ts';
import type { WakeupHandlers } from './wakeups.ts';

export type { Finish };

/** The agent working a queue: its endpoint, its agent, its granted queues and the session acting. */
export interface Worker {
  endpointId: string;
  agentId: string;
  queues: readonly string[];
  sessionId: string;
}

/** claim_next's long poll: how long to wait for work, and what ends the wait early. */
export interface WaitOptions {
  /** 0: answer at once. */
  waitMs: number;
  /** The call's end: cancelled, its client or session gone, the server stopping. The answer is then {empty: true}. */
  signal: AbortSignal;
  /** Runs at each look while waiting (the caller keeps its session live). */
  onWaiting?: () => void;
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

function withFailureFields(t: TodoMetaRow) {
  return {
    ...summarizeTodo(t),
    next_retry_at: rfc3339(t.next_retry_at) ?? null,
    dead_letter: t.state === 'failed' && t.next_retry_at === null,
  };
}

/** What complete and fail answer: the todo's summary, with fail's retry fields. */
const finishedView = (what: Finish, t: TodoMetaRow) => (what === 'complete' ? summarizeTodo(t) : withFailureFields(t));

/** claim_next's answer for a todo it claimed (a self-test's claim completed it), with the rings the claim acknowledged. */
function nextClaimed(row: ClaimedTodo, fence: { token?: string }) {
  if (row.synthetic) return { view: { empty: false, todo: selfTestView(row) }, ackedRings: row.acked_rings };
  const view = fence.token ? { empty: false, todo: fullTodo(row), lease_token: fence.token } : { empty: false, todo: fullTodo(row) };
  return { view, ackedRings: row.acked_rings };
}

/**
 * What an agent does with todos on its own queues: list, read, claim (by id or the next one),
 * heartbeat, and end a claim (complete, fail, release). Results are the agent-facing views; a
 * claim also returns the doorbell rings it acknowledged, for the caller's session to count.
 */
export class TodoWork {
  readonly waiters: ClaimWaiters;
  /** This instance's claim_next statements: claims that arrive while one runs go together in the next. */
  readonly #claimNext: ClaimNext;
  /** Heartbeat, complete, fail and release, batched the same way. */
  readonly #held: HeldTransitions;
  /** complete and fail with the claim after them, in one statement, batched the same way. */
  readonly #finishThenClaim: FinishThenClaim;

  constructor(
    private readonly base: ServiceBase,
    opts: { waiters?: ClaimWaiters } = {},
  ) {
    this.waiters = opts.waiters ?? new ClaimWaiters();
    this.#claimNext = new ClaimNext(base.sql, base.lanes);
    this.#held = new HeldTransitions(base.sql, base.lanes);
    this.#finishThenClaim = new FinishThenClaim(base.sql, base.lanes);
  }

  /** Long-polling claims wake on todo_ready, from whichever instance it came. */
  wakeups(): WakeupHandlers {
    return this.waiters.wakeups();
  }

  /** The one queue asked for, if granted, else every granted queue. */
  #queues(w: Worker, queue: string | undefined): readonly string[] {
    if (queue === undefined) return w.queues;
    if (!w.queues.includes(queue)) throw forbidden(`queue "${queue}" is not granted to this endpoint`);
    return [queue];
  }

  /** A page of the caller's todos, newest first; `next_cursor` asks for the next page (null at the end). */
  async list(w: Worker, f: { queue?: string; state?: TodoStateFilter; limit?: number; includeSynthetic?: boolean; cursor?: string }) {
    const { rows, next } = await listTodos(this.base.sql, w.endpointId, {
      queues: this.#queues(w, f.queue),
      state: f.state,
      limit: f.limit ?? LIST_DEFAULT_LIMIT,
      after: f.cursor === undefined ? null : decodeCursor(f.cursor),
      includeSynthetic: f.includeSynthetic === true,
    });
    return { todos: rows.map(summarizeTodo), next_cursor: next ? encodeCursor(next) : null };
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
   * The claim of one's own self-test todo by id, which needs no claim grant; null when the caller
   * has no such todo, for the verb to refuse as not granted.
   */
  async claimOwnTest(w: Worker, id: string) {
    const row = await claimOwnTestTodo(this.base.sql, callerOf(w), this.#queues(w, undefined), this.base.clock.now(), id);
    if (!row) return null;
    return { view: selfTestView(row), ackedRings: row.acked_rings };
  }

  /**
   * The next todo (see #claimNextNow). With a wait, an empty answer waits for ready work on those
   * queues: woken by todo_ready, it claims through the same statement as any claim_next, so one
   * todo goes to one waiter; the others wait on. A call that ends early (its signal) answers
   * empty and holds nothing: a claim that landed as it ended is released.
   */
  async claimNext(w: Worker, queue: string | undefined, opts: LeaseOptions, wait?: WaitOptions) {
    const queues = this.#queues(w, queue);
    if (!wait || wait.waitMs <= 0) return this.#claimNextNow(w, queues, opts);
    // The slot is taken before the first look, so work announced during it is not missed.
    const slot = this.waiters.enter(w.endpointId, queues);
    const deadline = performance.now() + wait.waitMs;
    try {
      for (;;) {
        if (wait.signal.aborted) return { view: { empty: true }, ackedRings: null };
        const claimed = await this.#claimNextNow(w, queues, opts);
        if (!claimed.view.empty) {
          if (!wait.signal.aborted) return claimed;
          await this.#giveBack(w, claimed.view);
          return { view: { empty: true }, ackedRings: null };
        }
        const left = deadline - performance.now();
        if (left <= 0) return claimed;
        const outcome = await slot.next(Math.min(left, LONG_POLL_RECHECK_MS), wait.signal);
        if (outcome === 'aborted') return { view: { empty: true }, ackedRings: null };
        wait.onWaiting?.();
      }
    } finally {
      slot.leave();
    }
  }

  /** A claim its caller will never see goes back to the queue (a self-test claim completed it: nothing to give back). */
  async #giveBack(w: Worker, claimed: object): Promise<void> {
    const view = claimed as { todo?: { id: string; self_test?: boolean }; lease_token?: string };
    const todo = view.todo;
    if (!todo || todo.self_test) return;
    try {
      await this.release(w, todo.id, view.lease_token);
    } catch (err) {
      this.base.log.warn({ todo_id: todo.id, err: (err as Error).message }, 'claim_next ended while claiming; the todo waits for its lease to run out');
    }
  }

  /** The next todo now: a self-test todo whose doorbell rang comes before real work (one statement). */
  async #claimNextNow(w: Worker, queues: readonly string[], opts: LeaseOptions) {
    const fence = mintFence(opts.requireFence);
    const row = await this.#claimNext.claim(callerOf(w), queues, leaseSeconds(opts.leaseTtlSeconds), this.base.clock.now(), fence.hash);
    if (!row) return { view: { empty: true }, ackedRings: null };
    return nextClaimed(row, fence);
  }

  /**
   * complete or fail, and then claim_next's claim for the same worker (`queue` and `opts` as
   * claim_next takes them), in one statement: the finished todo's view, and `next`, claim_next's
   * answer, or null when nothing was claimable at once (the caller goes on with claimNext, which
   * looks again past locked rows and may wait). A queue not granted is refused before the finish.
   */
  async finishThenClaimNext(w: Worker, what: Finish, id: string, result: unknown, leaseToken: string | undefined, queue: string | undefined, opts: LeaseOptions) {
    const queues = this.#queues(w, queue);
    const fence = mintFence(opts.requireFence);
    const call = { id, result, now: this.base.clock.now(), leaseTokenHash: hashToken(leaseToken) };
    const next = { queues, leaseSecs: leaseSeconds(opts.leaseTtlSeconds), session: w.sessionId, leaseTokenHash: fence.hash };
    const both = this.#finishThenClaim.add(callerOf(w), what, call, next);
    const { finished, claimed } = both ? await both : { finished: await this.#held[what](callerOf(w), call), claimed: null };
    return {
      finished: finishedView(what, finished),
      next: claimed ? nextClaimed(claimed, fence) : null,
    };
  }

  async heartbeat(w: Worker, id: string, leaseTtlSeconds: number | undefined, leaseToken: string | undefined) {
    const lease = leaseSeconds(leaseTtlSeconds);
    return summarizeTodo(await this.#held.heartbeat(callerOf(w), { id, lease, now: this.base.clock.now(), leaseTokenHash: hashToken(leaseToken) }));
  }

  async complete(w: Worker, id: string, result: unknown, leaseToken: string | undefined) {
    return finishedView('complete', await this.#held.complete(callerOf(w), { id, result, now: this.base.clock.now(), leaseTokenHash: hashToken(leaseToken) }));
  }

  async fail(w: Worker, id: string, result: unknown, leaseToken: string | undefined) {
    return finishedView('fail', await this.#held.fail(callerOf(w), { id, result, now: this.base.clock.now(), leaseTokenHash: hashToken(leaseToken) }));
  }

  async release(w: Worker, id: string, leaseToken: string | undefined) {
    const row = await this.#held.release(callerOf(w), { id, now: this.base.clock.now(), leaseTokenHash: hashToken(leaseToken) });
    // A release sends no todo_ready (it would ring the todo again): this instance's waiters hear it here,
    // other instances' at their next look.
    this.waiters.ready(w.endpointId, row.queue);
    return summarizeTodo(row);
  }
}
