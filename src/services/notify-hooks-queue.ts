/**
 * The notify hook delivery scheduler: a queue per hook, served round-robin by a few workers, so
 * one tenant's slow or refusing receivers cannot hold up another tenant's notifications.
 *
 * - At most one delivery per hook is in flight, and a hook's deliveries go out in order.
 * - A retry waits on a timer, holding no worker; the hook's later deliveries wait behind it.
 * - Hooks whose last delivery failed share at most half the workers, so healthy hooks always
 *   find one free within one attempt's timeout, however many failing hooks are queued.
 * - Every attempt first asks `attempt` about the hook again; a deleted or disabled hook (or one
 *   that `finish` reports disabled) has its queued deliveries dropped.
 *
 * No SQL and no HTTP here: NotifyHooks supplies both through `DeliveryRunner`.
 */

/** One notification waiting for (or in) delivery to one notify hook. */
export interface QueuedNotification {
  hookId: string;
  /** The hook's endpoint: the re-check before each attempt is scoped to it. */
  endpointId: string;
  type: string;
  body: string;
  msgId: string;
  /** Attempts made so far. */
  attempts: number;
}

export interface AttemptResult {
  ok: boolean;
  status: number | null;
  error: string | null;
  retry: boolean;
}

export interface DeliveryRunner {
  /** One attempt; `gone` when the hook was deleted or disabled since the delivery was queued. */
  attempt(d: QueuedNotification): Promise<AttemptResult | 'gone'>;
  /** The delivery's last attempt was made; `stop` when that outcome disabled the hook. */
  finish(d: QueuedNotification, last: AttemptResult): Promise<{ stop: boolean }>;
  /** Deliveries that will not be sent, with why. */
  dropped(ds: readonly QueuedNotification[], why: 'hook_gone' | 'hook_disabled' | 'hook_full' | 'queue_full' | 'stopped'): void;
  crashed(d: QueuedNotification, err: unknown): void;
}

export interface SchedulerOptions {
  workers: number;
  attempts: number;
  /** Waits before the 2nd, 3rd... attempts; each is jittered by ±20 %. */
  backoffMs: readonly number[];
  /** Deliveries waiting, all hooks together (memory bound). */
  queueSize: number;
  /** Deliveries waiting for one hook. */
  perHookQueue: number;
}

interface Lane {
  hookId: string;
  jobs: QueuedNotification[];
  /** In flight, or waiting on a retry timer. */
  busy: boolean;
  /** The hook's last delivery failed: it runs only in the failing share of the workers. */
  failing: boolean;
  timer: NodeJS.Timeout | null;
}

export class DeliveryScheduler {
  readonly #lanes = new Map<string, Lane>();
  /** Hooks with a delivery ready to go, in turn order. */
  #ready: Lane[] = [];
  readonly #inFlight = new Set<Promise<void>>();
  #failingInFlight = 0;
  #waiting = 0;
  #stopped = false;

  constructor(
    private readonly opts: SchedulerOptions,
    private readonly run: DeliveryRunner,
  ) {}

  /** Deliveries waiting or in flight. */
  get size(): number {
    return this.#waiting;
  }

  /** Queues one delivery; false when it was dropped (queue full, or the scheduler stopped). */
  enqueue(d: QueuedNotification, hookFailing: boolean): boolean {
    if (this.#stopped) {
      this.run.dropped([d], 'stopped');
      return false;
    }
    let lane = this.#lanes.get(d.hookId);
    if (lane && lane.jobs.length >= this.opts.perHookQueue) {
      this.run.dropped([d], 'hook_full');
      return false;
    }
    if (this.#waiting >= this.opts.queueSize) {
      this.run.dropped([d], 'queue_full');
      return false;
    }
    if (!lane) {
      lane = { hookId: d.hookId, jobs: [], busy: false, failing: hookFailing, timer: null };
      this.#lanes.set(d.hookId, lane);
    }
    lane.jobs.push(d);
    this.#waiting++;
    if (!lane.busy && lane.jobs.length === 1) this.#ready.push(lane);
    this.#pump();
    return true;
  }

  /** Drops a hook's waiting deliveries (deleted or disabled here); one in flight finishes. */
  forget(hookId: string, why: 'hook_gone' | 'hook_disabled'): void {
    const lane = this.#lanes.get(hookId);
    if (lane) this.#drop(lane, why);
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    for (const lane of [...this.#lanes.values()]) this.#drop(lane, 'stopped');
    while (this.#inFlight.size > 0) await Promise.all([...this.#inFlight]);
  }

  #pump(): void {
    const failingCap = Math.max(1, Math.floor(this.opts.workers / 2));
    while (!this.#stopped && this.#inFlight.size < this.opts.workers) {
      const i = this.#ready.findIndex((l) => !l.failing || this.#failingInFlight < failingCap);
      if (i < 0) return;
      const [lane] = this.#ready.splice(i, 1);
      this.#start(lane!);
    }
  }

  #start(lane: Lane): void {
    lane.busy = true;
    const countedFailing = lane.failing;
    if (countedFailing) this.#failingInFlight++;
    const p = this.#step(lane).finally(() => {
      if (countedFailing) this.#failingInFlight--;
      this.#inFlight.delete(p);
      this.#pump();
    });
    this.#inFlight.add(p);
  }

  async #step(lane: Lane): Promise<void> {
    const d = lane.jobs[0];
    if (!d) return this.#release(lane);
    let r: AttemptResult | 'gone';
    try {
      r = await this.run.attempt(d);
    } catch (err) {
      // A crash ends this delivery; the hook's next one still gets its turn.
      this.run.crashed(d, err);
      this.#done(lane, d);
      return this.#release(lane);
    }
    if (r === 'gone') return this.#drop(lane, 'hook_gone', true);
    d.attempts++;
    lane.failing = !r.ok;
    const live = this.#lanes.get(lane.hookId) === lane && !this.#stopped;
    if (live && !r.ok && r.retry && d.attempts < this.opts.attempts) {
      const wait = (this.opts.backoffMs[d.attempts - 1] ?? this.opts.backoffMs.at(-1) ?? 5000) * (0.8 + Math.random() * 0.4);
      lane.timer = setTimeout(() => {
        lane.timer = null;
        lane.busy = false;
        if (this.#stopped || this.#lanes.get(lane.hookId) !== lane) return;
        this.#ready.push(lane);
        this.#pump();
      }, Math.round(wait));
      lane.timer.unref();
      return;
    }
    this.#done(lane, d);
    let stop = false;
    try {
      ({ stop } = await this.run.finish(d, r));
    } catch (err) {
      this.run.crashed(d, err);
    }
    if (stop) this.#drop(lane, 'hook_disabled', true);
    else this.#release(lane);
  }

  #done(lane: Lane, d: QueuedNotification): void {
    if (lane.jobs[0] !== d) return;
    lane.jobs.shift();
    this.#waiting--;
  }

  /** The lane's delivery is done: its next one queues for a turn, or the lane goes. */
  #release(lane: Lane): void {
    lane.busy = false;
    if (this.#lanes.get(lane.hookId) !== lane) return;
    if (lane.jobs.length === 0) this.#lanes.delete(lane.hookId);
    else if (!this.#stopped && !this.#ready.includes(lane)) this.#ready.push(lane);
  }

  /**
   * Drops the lane's waiting deliveries. An attempt in flight ends on its own and is recorded,
   * unless `current` says the delivery in hand goes too (its hook is gone or now disabled).
   */
  #drop(lane: Lane, why: 'hook_gone' | 'hook_disabled' | 'stopped', current = false): void {
    if (lane.timer) {
      clearTimeout(lane.timer);
      lane.timer = null;
      lane.busy = false;
    }
    if (this.#lanes.get(lane.hookId) === lane) this.#lanes.delete(lane.hookId);
    this.#ready = this.#ready.filter((l) => l !== lane);
    const dropped = lane.jobs.splice(lane.busy && !current ? 1 : 0);
    this.#waiting -= dropped.length;
    if (dropped.length > 0) this.run.dropped(dropped, why);
  }
}
