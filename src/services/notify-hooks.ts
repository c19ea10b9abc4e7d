import type { ServiceBase } from './base.ts';
import { NOTIFY_HOOK_MARKER } from '../domain/hook-marker.ts';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { LookupFunction } from 'node:net';
import { ulid } from 'ulidx';
import type { Clock } from '../lib/clock.ts';
import { RateLimiter } from '../lib/rate-limit.ts';
import { randomUUID } from 'node:crypto';
import { sealedFor, type SecretBox } from '../lib/crypto-box.ts';
import type { Sql } from '../db/connect.ts';
import { inputsOf } from './presence.ts';
import { forbidden, invalidArgument } from '../domain/errors.ts';
import type { Logger } from '../lib/log.ts';
import type { Metrics } from '../lib/metrics.ts';
import { neutralizeText } from '../domain/neutralize.ts';
import { effective } from '../domain/presence/index.ts';
import { deleteHook, getEndpointHook, getOwnHook, hookTargets, insertHook, listHooks, recordHookOutcome, rotateHook, type HookRow } from '../store/hooks.ts';
import { pushEligibleBacklog, type TodoRow } from '../store/todos/index.ts';
import { rfc3339 } from '../domain/time.ts';
import { VERSION } from '../lib/version.ts';
import { mintHookSecret, signatureHeader } from '../lib/hook-signing.ts';
import { checkHookTarget, type OutboundPolicy, pointsAtSelf, type SelfAddress } from '../lib/ssrf.ts';

export const HOOK_BODY_MAX_BYTES = 4096;
export const ROTATION_GRACE_MS = 24 * 3_600_000;

export interface NotifyHookOptions extends OutboundPolicy {
  /** Hooks one endpoint may have (SWITCHBOARD_NOTIFY_HOOK_MAX). */
  max: number;
  attempts?: number;
  /** Waits before the 2nd and 3rd attempts; each is jittered by ±20 %. */
  backoffMs?: readonly number[];
  timeoutMs?: number;
  workers?: number;
  queueSize?: number;
  perMinute?: number;
  /** Where this server answers: a hook may not point at it. */
  self?: () => SelfAddress;
}

interface Job {
  hook: HookRow;
  body: string;
  msgId: string;
}

export type HookReason = 'created' | 'requeued';

/**
 * Notify hooks (SPEC-0024): outbound calls telling a consumer with no live session that work is
 * waiting. Fired after commit by the instance that made the transition; delivered by a bounded
 * in-process queue and a few workers so ingestion never waits on a receiver.
 */
export class NotifyHooks {
  readonly #queue: Job[] = [];
  /** Notifications per hook: `perMinute` (default 120) a minute, refilled on the injected clock. */
  readonly #perHook: RateLimiter;
  #waiting: (() => void)[] = [];
  #stopped = false;
  readonly #workers: Promise<void>[] = [];

  private readonly sql: Sql;
  private readonly clock: Clock;
  private readonly log: Logger;

  constructor(
    base: ServiceBase,
    private readonly box: SecretBox,
    private readonly metrics: Metrics,
    private readonly opts: NotifyHookOptions,
  ) {
    ({ sql: this.sql, clock: this.clock, log: this.log } = base);
    const perMinute = opts.perMinute ?? 120;
    this.#perHook = new RateLimiter({ rate: perMinute / 60, burst: perMinute }, this.clock);
    for (let i = 0; i < (opts.workers ?? 8); i++) this.#workers.push(this.#work());
  }

  // ---------------------------------------------------------------------------------------------
  // Management

  view(h: HookRow) {
    let shown = h.url;
    try {
      const u = new URL(h.url);
      if (u.search) u.search = '?redacted';
      shown = u.toString();
    } catch {
      /* stored URLs were validated */
    }
    return {
      hook_id: h.id,
      url: shown,
      queues: h.queues,
      ignore_presence: h.ignore_presence,
      enabled: h.enabled,
      disabled_reason: h.disabled_reason,
      disabled_at: rfc3339(h.disabled_at) ?? null,
      consecutive_failures: h.consecutive_failures,
      last_attempt_at: rfc3339(h.last_attempt_at) ?? null,
      last_status: h.last_status,
      last_error: h.last_error,
      created_at: rfc3339(h.created_at),
    };
  }

  async create(owner: { id: string; slug: string; queues: readonly string[] }, input: { url?: unknown; queues?: unknown; ignore_presence?: unknown }, by: string) {
    if (typeof input.url !== 'string') throw invalidArgument('url', 'is required and must be a string');
    const target = await checkHookTarget(input.url, this.opts);
    if (this.opts.self && pointsAtSelf(target, this.opts.self())) {
      throw invalidArgument('url', `points at this Switchboard server (${target.url.origin}); a notify hook must call a receiver of your own`);
    }
    const queues = input.queues === undefined ? [] : input.queues;
    if (!Array.isArray(queues) || queues.some((q) => typeof q !== 'string')) throw invalidArgument('queues', 'must be a list of queue names');
    for (const q of queues as string[]) {
      if (!owner.queues.includes(q)) {
        const why = `"${q}" is not one of endpoint ${owner.slug}'s queues`;
        throw by === 'agent' ? forbidden(`queues: ${why}`) : invalidArgument('queues', why);
      }
    }
    if (input.ignore_presence !== undefined && typeof input.ignore_presence !== 'boolean') throw invalidArgument('ignore_presence', 'must be true or false');
    const secret = mintHookSecret();
    // The id is chosen here: the sealed secret is bound to it.
    const id = randomUUID();
    const row = await insertHook(
      this.sql,
      {
        endpointId: owner.id,
        url: target.url.toString(),
        id,
        sealedSecret: this.box.for(sealedFor('notify_hooks', id)).seal(secret),
        queues: [...new Set(queues as string[])],
        ignorePresence: input.ignore_presence === true,
        createdBy: by,
        max: this.opts.max,
      },
      this.clock.now(),
    );
    return { ...this.view(row), signing_secret: secret };
  }

  async list(endpointId: string) {
    const hooks = await listHooks(this.sql, endpointId);
    return { hooks: hooks.map((h) => this.view(h)), ceiling: { max: this.opts.max, used: hooks.length } };
  }

  async rotate(row: HookRow) {
    const secret = mintHookSecret();
    const now = this.clock.now();
    const rotated = await rotateHook(this.sql, row.id, this.box.for(sealedFor('notify_hooks', row.id)).seal(secret), new Date(now.getTime() + ROTATION_GRACE_MS), now);
    return { ...this.view(rotated), signing_secret: secret };
  }

  async delete(row: HookRow) {
    await deleteHook(this.sql, row.id);
    return { hook_id: row.id, deleted: true };
  }

  endpointHook(endpointId: string, hookId: string) {
    return getEndpointHook(this.sql, endpointId, hookId);
  }

  /** One of the human's hooks; another human's answers like a missing one. */
  ownHook(humanId: string, hookId: string) {
    return getOwnHook(this.sql, humanId, hookId);
  }

  // ---------------------------------------------------------------------------------------------
  // Firing. Callers pass only push-eligible todos (never synthetic, never quarantined).

  /** A todo became ready (created, or back to pending): one `todo.ready` per matching hook. */
  /** Fire-and-forget forms for after-commit fan-outs: a failure is logged, never thrown at the caller. */
  announceTodo(todo: TodoRow, reason: HookReason): void {
    void this.todoReady(todo, reason).catch((err: unknown) => this.#cannotFire(err));
  }

  announceBacklog(endpointId: string, reason: string): void {
    void this.backlog(endpointId, reason).catch((err: unknown) => this.#cannotFire(err));
  }

  #cannotFire(err: unknown): void {
    this.log.error({ stage: 'notify hooks', err: (err as Error).message }, 'notify hooks could not fire');
  }

  async todoReady(todo: TodoRow, reason: HookReason): Promise<void> {
    if (todo.synthetic) return;
    const targets = await hookTargets(this.sql, todo.endpoint_id);
    if (!targets || targets.hooks.length === 0) return;
    const out = effective(inputsOf(targets.endpoint), this.clock.now()).presence === 'out';
    const body = {
      type: 'todo.ready',
      reason,
      todo_id: todo.id,
      queue: todo.queue,
      ...(todo.kind ? { kind: todo.kind } : {}),
      ...(todo.source ? { source: todo.source } : {}),
      summary: neutralizeText(todo.title, 200),
      endpoint: targets.endpoint.slug,
      attempt: todo.attempt,
      created_at: rfc3339(todo.created_at),
    };
    for (const hook of targets.hooks) {
      if (out && !hook.ignore_presence) continue;
      const queues = hook.queues.length > 0 ? hook.queues : targets.endpoint.scope_queues;
      if (!queues.includes(todo.queue) || !targets.endpoint.scope_queues.includes(todo.queue)) continue;
      this.#enqueue(hook, body);
    }
  }

  /** An endpoint came back in: one `todos.backlog` per presence-respecting hook, counts only. */
  async backlog(endpointId: string, reason: string): Promise<void> {
    const targets = await hookTargets(this.sql, endpointId);
    const hooks = targets?.hooks.filter((h) => !h.ignore_presence) ?? [];
    if (!targets || hooks.length === 0) return;
    const backlog = await pushEligibleBacklog(this.sql, endpointId);
    if (backlog.length === 0) return;
    const now = this.clock.now();
    for (const hook of hooks) {
      const scope = hook.queues.length > 0 ? hook.queues : targets.endpoint.scope_queues;
      const mine = backlog.filter((t) => scope.includes(t.queue));
      if (mine.length === 0) continue;
      this.#enqueue(hook, {
        type: 'todos.backlog',
        reason,
        endpoint: targets.endpoint.slug,
        pending: mine.length,
        queues: [...new Set(mine.map((t) => t.queue))].sort(),
        oldest_pending_seconds: Math.max(0, Math.round((now.getTime() - mine[0]!.created_at.getTime()) / 1000)),
        created_at: rfc3339(now),
      });
    }
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    for (const wake of this.#waiting.splice(0)) wake();
    await Promise.all(this.#workers);
  }

  // ---------------------------------------------------------------------------------------------
  // Delivery

  #enqueue(hook: HookRow, payload: Record<string, unknown>): void {
    let body = JSON.stringify(payload);
    if (Buffer.byteLength(body) > HOOK_BODY_MAX_BYTES) body = JSON.stringify({ ...payload, summary: '' });
    const type = String(payload.type);
    if (this.#perHook.take(hook.id) > 0) {
      this.metrics.hookNotifications.inc({ type, outcome: 'dropped' });
      this.log.warn({ hook_id: hook.id, type }, 'notify hook over its rate; notification dropped');
      return;
    }
    if (this.#queue.length >= (this.opts.queueSize ?? 1024)) {
      this.metrics.hookNotifications.inc({ type, outcome: 'dropped' });
      this.log.warn({ hook_id: hook.id, type }, 'notify queue full; notification dropped');
      return;
    }
    this.#queue.push({ hook, body, msgId: `msg_${ulid()}` });
    this.#waiting.shift()?.();
  }

  async #work(): Promise<void> {
    while (!this.#stopped) {
      const job = this.#queue.shift();
      if (!job) {
        await new Promise<void>((wake) => this.#waiting.push(wake));
        continue;
      }
      await this.#deliver(job).catch((err: unknown) => this.log.error({ hook_id: job.hook.id, err: (err as Error).message }, 'notify hook delivery crashed'));
    }
  }

  async #deliver(job: Job): Promise<void> {
    const attempts = this.opts.attempts ?? 3;
    const backoff = this.opts.backoffMs ?? [1000, 5000];
    const type = (JSON.parse(job.body) as { type: string }).type;
    let last: { ok: boolean; status: number | null; error: string | null; retry: boolean } = { ok: false, status: null, error: 'not attempted', retry: false };
    for (let i = 0; i < attempts; i++) {
      if (i > 0) await new Promise((r) => setTimeout(r, Math.round((backoff[i - 1] ?? 5000) * (0.8 + Math.random() * 0.4))));
      last = await this.#attempt(job);
      this.metrics.hookAttempts.inc({ result: last.ok ? '2xx' : classify(last) });
      if (last.ok || !last.retry) break;
    }
    const { disabled } = await recordHookOutcome(this.sql, job.hook.id, { ok: last.ok, status: last.status, error: last.error }, this.clock.now());
    this.metrics.hookNotifications.inc({ type, outcome: last.ok ? 'delivered' : 'failed' });
    if (disabled) {
      this.metrics.hooksDisabled.inc({ reason: 'consecutive_failures' });
      this.log.warn({ hook_id: job.hook.id, endpoint_id: job.hook.endpoint_id }, 'notify hook disabled after repeated failures');
    }
    this.log.info({ hook_id: job.hook.id, type, ok: last.ok, status: last.status, error: last.error }, 'notify hook delivery');
  }

  async #attempt(job: Job): Promise<{ ok: boolean; status: number | null; error: string | null; retry: boolean }> {
    let target;
    try {
      target = await checkHookTarget(job.hook.url, this.opts);
    } catch (err) {
      return { ok: false, status: null, error: `rejected: ${(err as Error).message}`, retry: false };
    }
    const now = this.clock.now();
    const timestamp = Math.floor(now.getTime() / 1000);
    const box = this.box.for(sealedFor('notify_hooks', job.hook.id));
    const secrets = [box.open(job.hook.secret)];
    if (job.hook.prev_secret && job.hook.prev_secret_expires_at && job.hook.prev_secret_expires_at > now) secrets.push(box.open(job.hook.prev_secret));
    // Dial exactly the address that was checked: no second DNS answer can slip in.
    const lookup: LookupFunction = (_host, options, cb) => {
      if ((options as { all?: boolean }).all) (cb as unknown as (e: null, a: { address: string; family: number }[]) => void)(null, [{ address: target.address, family: target.family }]);
      else cb(null, target.address, target.family);
    };
    const request = target.url.protocol === 'https:' ? httpsRequest : httpRequest;
    const timeoutMs = this.opts.timeoutMs ?? 5000;
    return new Promise((resolve) => {
      const req = request(
        target.url,
        {
          method: 'POST',
          lookup,
          servername: target.url.hostname,
          timeout: timeoutMs,
          headers: {
            'content-type': 'application/json',
            'user-agent': `switchboard/${VERSION}`,
            'webhook-id': job.msgId,
            'webhook-timestamp': String(timestamp),
            'webhook-signature': signatureHeader(secrets, job.msgId, timestamp, job.body),
            [NOTIFY_HOOK_MARKER.toLowerCase()]: job.hook.id,
          },
        },
        (res: IncomingMessage) => {
          let read = 0;
          res.on('data', (c: Buffer) => {
            read += c.length;
            if (read > 64 * 1024) res.destroy();
          });
          const status = res.statusCode ?? 0;
          res.on('close', () => {
            const ok = status >= 200 && status < 300;
            resolve({ ok, status, error: ok ? null : status >= 300 && status < 400 ? 'redirect refused' : `http ${status}`, retry: status === 408 || status === 429 || status >= 500 });
          });
        },
      );
      req.on('timeout', () => req.destroy(new Error('timeout')));
      // The socket timeout only fires on silence: this bounds the attempt as a whole, so a receiver
      // trickling bytes cannot hold a worker past the timeout.
      const deadline = setTimeout(() => req.destroy(new Error('timeout')), timeoutMs);
      req.on('close', () => clearTimeout(deadline));
      req.on('error', (err) => resolve({ ok: false, status: null, error: err.message === 'timeout' ? 'timeout' : `network: ${(err as NodeJS.ErrnoException).code ?? err.message}`, retry: true }));
      req.end(job.body);
    });
  }
}

function classify(r: { status: number | null; error: string | null }): string {
  if (r.status !== null) return `${Math.floor(r.status / 100)}xx`;
  if (r.error === 'timeout') return 'timeout';
  if (r.error?.startsWith('rejected')) return 'rejected_ssrf';
  return 'network';
}
