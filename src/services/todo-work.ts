import { createHash, randomBytes } from 'node:crypto';
import { notFound } from '../domain/errors.ts';
import { scopedQueue } from '../domain/scope.ts';
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
  isDead,
  listTodos,
  routingOf,
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
import type { Session } from '../sessions/registry.ts';
import type { DoorbellAcks } from './doorbell/acks.ts';
import type { TodoEvents } from './todo-events.ts';

export type { Finish };

/** The agent working a queue: its endpoint, its agent, its granted queues and the session acting (whose claims acknowledge its rings). */
export interface Worker {
  endpointId: string;
  slug: string;
  agentId: string;
  queues: readonly string[];
  session: Session;
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

const callerOf = (w: Worker): Caller => ({ endpointId: w.endpointId, owner: `agent:${w.agentId}`, queues: w.queues, sessionId: w.session.id });

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

/** get_todo's and fail's retry fields: when the next retry comes, and `dead` always present (as the API's detail has it). */
function withFailureFields(t: TodoMetaRow) {
  return {
    ...summarizeTodo(t),
    next_retry_at: rfc3339(t.next_retry_at) ?? null,
    dead: isDead(t),
  };
}

/** What complete and fail answer: the todo's summary, with fail's retry fields. */
const finishedView = (what: Finish, t: TodoMetaRow) => (what === 'complete' ? summarizeTodo(t) : withFailureFields(t));

/**
 * The answers for a claimed todo, built in one place: `claim` answers the todo itself, claim_next
 * and `next` wrap it as {empty: false, todo}. A fenced claim carries its lease token (beside the
 * todo's fields, or beside `todo`); a self-test's claim completed it, so it has no token.
 */
function claimAnswer(row: ClaimedTodo, fence: { token?: string }, shape: 'todo' | 'next') {
  const todo = row.synthetic ? selfTestView(row) : fullTodo(row);
  const token = row.synthetic || !fence.token ? {} : { lease_token: fence.token };
  return shape === 'todo' ? { ...todo, ...token } : { empty: false as const, todo, ...token };
}

const EMPTY = { empty: true } as const;

/** A claim_next claim not yet answered: its row and the fence minted for it. */
interface NextClaim {
  row: ClaimedTodo;
  fence: { token?: string };
}

/**
 * What an agent does with todos on its own queues: list, read, claim (by id or the next one),
 * heartbeat, and end a claim (complete, fail, release). Results are the agent-facing views. Every
 * claim acknowledges the doorbell rings it answers for the worker's session here, so no claim
 * path can skip it; a release hands the todo to TodoEvents.
 */
export class TodoWork {
  readonly waiters: ClaimWaiters;
  /** This instance's claim_next statements: claims that arrive while one runs go together in the next. */
  readonly #claimNext: ClaimNext;
  /** Heartbeat, complete, fail and release, batched the same way. */
  readonly #held: HeldTransitions;
  /** complete and fail with the claim after them, in one statement, batched the same way. */
  readonly #finishThenClaim: FinishThenClaim;

  readonly #acks: Pick<DoorbellAcks, 'acknowledged'> | undefined;
  readonly #events: Pick<TodoEvents, 'becameClaimable'> | undefined;

  constructor(
    private readonly base: ServiceBase,
    opts: { waiters?: ClaimWaiters; acks?: Pick<DoorbellAcks, 'acknowledged'>; events?: Pick<TodoEvents, 'becameClaimable'> } = {},
  ) {
    this.waiters = opts.waiters ?? new ClaimWaiters();
    this.#acks = opts.acks;
    this.#events = opts.events;
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
    return queue === undefined ? w.queues : [scopedQueue({ slug: w.slug, queues: w.queues }, 'queue', queue, 'agent')];
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
    // `routing` as the operator's view has it (GET /api/v1/endpoints/{ref}/todos/{id}): why the todo exists.
    return { ...withFailureFields(row), payload: row.payload, result: row.result ?? null, routing: routingOf(row) };
  }

  /** A claim's rings, acknowledged by the worker's session: every claim path passes here before it answers. */
  async #acknowledge(w: Worker, row: ClaimedTodo): Promise<void> {
    await this.#acks?.acknowledged(w.session, row.acked_rings, 'claim');
  }

  async claim(w: Worker, id: string, opts: LeaseOptions) {
    const fence = mintFence(opts.requireFence);
    const row = await claimTodo(this.base.sql, callerOf(w), id, leaseSeconds(opts.leaseTtlSeconds), this.base.clock.now(), fence.hash);
    await this.#acknowledge(w, row);
    return claimAnswer(row, fence, 'todo');
  }

  /**
   * The claim of one's own self-test todo by id, which needs no claim grant; null when the caller
   * has no such todo, for the verb to refuse as not granted.
   */
  async claimOwnTest(w: Worker, id: string) {
    const row = await claimOwnTestTodo(this.base.sql, callerOf(w), this.#queues(w, undefined), this.base.clock.now(), id);
    if (!row) return null;
    await this.#acknowledge(w, row);
    return claimAnswer(row, {}, 'todo');
  }

  /**
   * The next todo (see #claimNextNow). With a wait, an empty answer waits for ready work on those
   * queues: woken by todo_ready, it claims through the same statement as any claim_next, so one
   * todo goes to one waiter; the others wait on. A call that ends early (its signal) answers
   * empty and holds nothing: a claim that landed as it ended is released.
   */
  async claimNext(w: Worker, queue: string | undefined, opts: LeaseOptions, wait?: WaitOptions) {
    const queues = this.#queues(w, queue);
    if (!wait || wait.waitMs <= 0) return this.#answerNext(w, await this.#claimNextNow(w, queues, opts));
    // The slot is taken before the first look, so work announced during it is not missed.
    const slot = this.waiters.enter(w.endpointId, queues);
    const deadline = performance.now() + wait.waitMs;
    try {
      for (;;) {
        if (wait.signal.aborted) return EMPTY;
        const claimed = await this.#claimNextNow(w, queues, opts);
        if (claimed) {
          if (!wait.signal.aborted) return this.#answerNext(w, claimed);
          await this.#giveBack(w, claimed);
          return EMPTY;
        }
        const left = deadline - performance.now();
        if (left <= 0) return EMPTY;
        const outcome = await slot.next(Math.min(left, LONG_POLL_RECHECK_MS), wait.signal);
        if (outcome === 'aborted') return EMPTY;
        wait.onWaiting?.();
      }
    } finally {
      slot.leave();
    }
  }

  /** A claim its caller will never see goes back to the queue, acknowledging nothing (a self-test claim completed it: nothing to give back). */
  async #giveBack(w: Worker, { row, fence }: NextClaim): Promise<void> {
    if (row.synthetic) return;
    try {
      await this.release(w, row.id, fence.token);
    } catch (err) {
      this.base.log.warn({ todo_id: row.id, err: (err as Error).message }, 'claim_next ended while claiming; the todo waits for its lease to run out');
    }
  }

  /** The next todo now, in one statement (never a self-test todo, SPEC-0025 REQ-9); null when none is claimable. */
  async #claimNextNow(w: Worker, queues: readonly string[], opts: LeaseOptions): Promise<NextClaim | null> {
    const fence = mintFence(opts.requireFence);
    const row = await this.#claimNext.claim(callerOf(w), queues, leaseSeconds(opts.leaseTtlSeconds), this.base.clock.now(), fence.hash);
    return row ? { row, fence } : null;
  }

  /** claim_next's answer: the claim's rings acknowledged, or empty. */
  async #answerNext(w: Worker, claimed: NextClaim | null) {
    if (!claimed) return EMPTY;
    await this.#acknowledge(w, claimed.row);
    return claimAnswer(claimed.row, claimed.fence, 'next');
  }

  /**
   * complete or fail, and then claim_next's claim for the same worker (`queue` and `opts` as
   * claim_next takes them), in one statement: the finished todo's view, and `next`, claim_next's
   * answer (a promise), or null when nothing was claimable at once (the caller goes on with claimNext, which
   * looks again past locked rows and may wait). A queue not granted is refused before the finish.
   */
  async finishThenClaimNext(w: Worker, what: Finish, id: string, result: unknown, leaseToken: string | undefined, queue: string | undefined, opts: LeaseOptions) {
    const queues = this.#queues(w, queue);
    const fence = mintFence(opts.requireFence);
    const call = { id, result, now: this.base.clock.now(), leaseTokenHash: hashToken(leaseToken) };
    const next = { queues, leaseSecs: leaseSeconds(opts.leaseTtlSeconds), session: w.session.id, leaseTokenHash: fence.hash };
    const both = this.#finishThenClaim.add(callerOf(w), what, call, next);
    const { finished, claimed } = both ? await both : { finished: await this.#held[what](callerOf(w), call), claimed: null };
    // The finish stands whatever answering the claim does: `next` is a promise the caller awaits
    // apart, so a failed acknowledgement is the next claim's error, not the finish's.
    return {
      finished: finishedView(what, finished),
      next: claimed ? this.#answerNext(w, { row: claimed, fence }) : null,
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
    // A release rings and hooks nothing (READY_EFFECTS), so the sender gate is not asked.
    this.#events?.becameClaimable([{ pushEligible: false, todo: row }], 'released', 'needed');
    return summarizeTodo(row);
  }
}
