import type { ServiceBase } from '../base.ts';
import { ulid } from 'ulidx';
import type { Clock } from '../../lib/clock.ts';
import type { Sql } from '../../db/connect.ts';
import { SwitchboardError, invalidArgument, notFound } from '../../domain/errors.ts';
import type { Logger } from '../../lib/log.ts';
import type { SessionRegistry } from '../../sessions/registry.ts';
import type { SessionDirectory } from '../session-directory.ts';
import {
  cleanUpSelfTestsUnscoped,
  getSelfTest,
  recordTestDelivery,
  overdueTestsUnscoped,
  selfTestEndpointUnscoped,
  settleUndeliveredTest,
  settleUnrungTestsUnscoped,
  startSelfTest,
  takeTestDelivery,
  type SelfTestRow,
  type TestRingOutcome,
} from '../../store/selftests.ts';
import { notify } from '../../store/channels.ts';
import { todoQueueUnscoped } from '../../store/todos/index.ts';
import { pruneRingsUnscoped } from '../../store/rings.ts';
import { rfc3339 } from '../../domain/time.ts';
import { VERSION } from '../../lib/version.ts';
import type { Doorbell } from './doorbell.ts';
import type { WakeupHandlers } from '../wakeups.ts';

export const TEST_WAIT_DEFAULT_SECONDS = 60;
export const TEST_WAIT_MIN_SECONDS = 10;
export const TEST_WAIT_MAX_SECONDS = 300;
/** The test doorbell is written this long after test_doorbell returns. */
export const TEST_RING_DELAY_MS = 2000;
/** How long other instances get to take a test ring before it is settled as no_session. */
export const TEST_TAKE_GRACE_MS = 3000;
export const SELF_TEST_CLEANUP_INTERVAL_MS = 60_000;
/** How often every instance rings the overdue tests it holds a session for and ends those that could not ring. */
export const SELF_TEST_RING_INTERVAL_MS = 5_000;

/** SPEC-0025 REQ-8's six verdicts, and `pending` while the wait runs. */
export type Verdict = 'pending' | 'pass' | 'no_session' | 'no_stream' | 'write_failed' | 'unheard';

export const CHANNEL_NOTE =
  'The server advertised claude/channel. Whether a client listens to it cannot be observed from the server: only a claim of the test todo proves it.';
export const TROUBLESHOOTING = 'Troubleshooting: /docs/connect#troubleshooting on this Switchboard server';

/** The hint of a test whose todo was claimed before its doorbell was written: `unheard`, pulling proven, hearing not. */
export const CLAIMED_FIRST =
  'The test todo was claimed before its doorbell was written (by the todo_id the test returned): that proves pulling works, not that the doorbell is heard. Start a new test and claim its todo only when the doorbell arrives.';

/** The hints table (SPEC-0025 REQ-8): by verdict and by client family. */
export function hintsFor(verdict: Verdict, clientName: string | null, opts: { claimedFirst?: boolean } = {}): string[] {
  if (verdict === 'pass' || verdict === 'pending') return [];
  if (opts.claimedFirst) return [CLAIMED_FIRST, TROUBLESHOOTING];
  const claudeCode = (clientName ?? '').toLowerCase() === 'claude-code';
  let hints: string[];
  if (verdict === 'unheard' || verdict === 'no_stream') {
    hints = claudeCode
      ? [
          'Start Claude Code with --dangerously-load-development-channels server:switchboard; where your organization allowlists the plugin, use --channels plugin:switchboard@<marketplace> instead.',
          'Pass --allowedTools mcp__switchboard, or a woken session stops at a permission prompt.',
          'claude -p (print mode) cannot be woken: use a notify hook instead (/docs/connect#clients-without-push).',
          'Under Harness, enable its development-channels auto-confirm.',
        ]
      : [
          'The client must support notifications/claude/channel and keep its notification stream (GET) open.',
          'See the connect guide for your client: /docs/connect#other-mcp-clients',
        ];
  } else if (verdict === 'no_session') {
    hints = ['Nothing is connected to this endpoint. Check the MCP URL and credential; switchboard doctor lists attached sessions.'];
  } else {
    hints = ['The stream closed during the write. Retry; if it repeats, the client is dropping its stream.'];
  }
  return [...hints, TROUBLESHOOTING];
}

export interface SelfTestEndpoint {
  id: string;
  slug: string;
  queues: readonly string[];
}

export function parseWaitSeconds(raw: unknown): number {
  if (raw === undefined || raw === null) return TEST_WAIT_DEFAULT_SECONDS;
  if (typeof raw !== 'number' || !Number.isInteger(raw) || raw < TEST_WAIT_MIN_SECONDS || raw > TEST_WAIT_MAX_SECONDS) {
    throw invalidArgument('wait_seconds', `must be a whole number of seconds from ${TEST_WAIT_MIN_SECONDS} to ${TEST_WAIT_MAX_SECONDS}`);
  }
  return raw;
}

/**
 * The end-to-end self-test (SPEC-0025 REQ-7 to REQ-10): a synthetic todo, a test doorbell about
 * two seconds later through the normal session choice, and a report whose verdict says whether
 * anything claimed it in time.
 */
export class SelfTests {
  readonly #timers = new Set<NodeJS.Timeout>();

  private readonly sql: Sql;
  private readonly clock: Clock;
  private readonly log: Logger;

  constructor(
    base: ServiceBase,
    private readonly sessions: SessionRegistry,
    private readonly directory: SessionDirectory,
    private readonly doorbell: Doorbell,
    private readonly opts: { ringDelayMs?: number; takeGraceMs?: number } = {},
  ) {
    ({ sql: this.sql, clock: this.clock, log: this.log } = base);
  }

  async start(endpoint: SelfTestEndpoint, waitSecondsRaw: unknown) {
    const waitSeconds = parseWaitSeconds(waitSecondsRaw);
    const queue = [...endpoint.queues].sort()[0];
    if (!queue) throw new SwitchboardError('invalid_argument', 'this endpoint has no queue to test on', { field: 'queues' });
    const now = this.clock.now();
    const delay = this.opts.ringDelayMs ?? TEST_RING_DELAY_MS;
    // Every instance's sessions: the agent's stream may be on another instance than this request.
    const attached = await this.directory.sessionsOf(endpoint.id);
    const channelCapability = {
      server_advertised: true,
      sessions: attached.map((s) => ({ client_name: s.client_name, client_version: s.client_version, stream_open: s.stream_instance !== null })),
      note: CHANNEL_NOTE,
    };
    const streamAttached = attached.some((s) => s.stream_instance !== null);
    let row: SelfTestRow;
    try {
      row = await startSelfTest(
        this.sql,
        {
          testId: `dt_${ulid()}`,
          endpointId: endpoint.id,
          queue,
          waitSeconds,
          ringDueAt: new Date(now.getTime() + delay),
          serverVersion: VERSION,
          streamAttached,
          channelCapability,
        },
        now,
      );
    } catch (err) {
      if (err instanceof SwitchboardError) throw err;
      throw new Error(`self-test start for ${endpoint.slug}: ${(err as Error).message}`, { cause: err });
    }
    this.#later(delay, () => this.#ringDue(endpoint, row.test_id));
    this.log.info({ slug: endpoint.slug, test_id: row.test_id, wait_seconds: waitSeconds }, 'self-test started');
    return {
      test_id: row.test_id,
      todo_id: row.todo_id,
      report_after: rfc3339(new Date(row.ring_due_at.getTime() + waitSeconds * 1000)),
      server_version: VERSION,
      stream_attached: streamAttached,
      channel_capability: channelCapability,
    };
  }

  async report(endpointId: string, testId: string) {
    if (typeof testId !== 'string') throw notFound(`no self-test ${testId} on this endpoint`);
    const now = this.clock.now();
    // The verdict of a test that could not ring is final at report_after, whether or not a tick ran.
    await settleUnrungTestsUnscoped(this.sql, now, { testId });
    const row = await getSelfTest(this.sql, endpointId, testId);
    if (!row) throw notFound(`no self-test ${testId} on this endpoint`);
    const verdict = verdictOf(row, now);
    const claimedWithin =
      row.claimed_at && row.delivered_at ? Math.max(0, Math.round((row.claimed_at.getTime() - row.delivered_at.getTime()) / 100) / 10) : null;
    return {
      test_id: row.test_id,
      todo_id: row.todo_id,
      wait_seconds: row.wait_seconds,
      server_version: row.server_version,
      stream_attached: row.stream_attached,
      channel_capability: row.channel_capability,
      delivered: { written: row.delivery === 'written', at: rfc3339(row.delivered_at) ?? null, session_id: row.delivered_session_id },
      claimed_within_seconds: verdict === 'pass' ? claimedWithin : null,
      verdict,
      hints: hintsFor(verdict, row.client_name ?? firstClientName(row.channel_capability), { claimedFirst: claimedFirst(row) }),
    };
  }

  /** Another instance announced a due test ring: take it if a stream of its endpoint is open here. */
  async onWakeup(testId: string): Promise<void> {
    const endpointId = await selfTestEndpointUnscoped(this.sql, testId);
    if (!endpointId || !(await this.doorbell.ringsBestHere(endpointId))) return;
    await this.#deliverHere(testId);
  }

  wakeups(): WakeupHandlers {
    return {
      doorbell_test: {
        onNotify: ({ testId }) =>
          void this.onWakeup(testId).catch((err: unknown) => this.log.warn({ err: (err as Error).message, test_id: testId }, 'self-test wakeup failed')),
      },
    };
  }

  async cleanUp(): Promise<void> {
    const now = this.clock.now();
    const { todos, reports } = await cleanUpSelfTestsUnscoped(this.sql, now);
    const rings = await pruneRingsUnscoped(this.sql, now);
    if (todos || reports || rings) this.log.info({ synthetic_todos: todos, reports, rings }, 'self-test and ring housekeeping');
  }

  /**
   * One tick on this instance: rings the overdue tests of endpoints with a stream here (the
   * instance that started a test may have stopped before its timer fired), then ends as
   * `no_session` every test still unrung at its report_after.
   */
  async ringOverdue(): Promise<{ rung: number; settled: number }> {
    const here = this.sessions.streamingEndpoints();
    const overdue = await overdueTestsUnscoped(this.sql, here, this.clock.now());
    for (const testId of overdue) await this.#deliverHere(testId);
    const settled = await settleUnrungTestsUnscoped(this.sql, this.clock.now());
    if (settled.length > 0) this.log.info({ test_ids: settled }, 'self-tests that could not ring ended as no_session');
    return { rung: overdue.length, settled: settled.length };
  }

  stop(): void {
    for (const t of this.#timers) clearTimeout(t);
    this.#timers.clear();
  }

  async #ringDue(endpoint: SelfTestEndpoint, testId: string): Promise<void> {
    if (await this.doorbell.ringsBestHere(endpoint.id)) {
      await this.#deliverHere(testId);
      return;
    }
    const attached = await this.directory.sessionsOf(endpoint.id);
    const outcome = {
      delivery: attached.length === 0 ? ('no_session' as const) : ('no_stream' as const),
      clientName: attached[0]?.client_name ?? null,
    };
    const settle = async () => {
      if (await settleUndeliveredTest(this.sql, testId, this.clock.now(), outcome)) {
        this.log.info({ slug: endpoint.slug, test_id: testId, delivery: outcome.delivery }, 'self-test ring found no open stream');
      }
    };
    if (!attached.some((s) => s.stream_instance !== null)) return settle();
    // The stream (or the likelier one) is on another instance: it takes the ring; after the grace
    // a stream here rings it if none did, and otherwise the test settles.
    await notify(this.sql, 'doorbell_test', { testId });
    this.#later(this.opts.takeGraceMs ?? TEST_TAKE_GRACE_MS, async () => {
      if (this.sessions.hasOpenStream(endpoint.id)) await this.#deliverHere(testId);
      await settle();
    });
  }

  async #deliverHere(testId: string): Promise<void> {
    const row = await takeTestDelivery(this.sql, testId, this.directory.instanceId);
    if (!row) return;
    const session = this.sessions.sessionsOf(row.endpoint_id)[0];
    const queue = (await todoQueueUnscoped(this.sql, row.todo_id)) ?? '';
    const target = { id: row.todo_id, endpoint_id: row.endpoint_id, queue, title: 'Switchboard self-test', kind: 'doorbell_test' };
    const outcome = this.doorbell.ringTest(target, row.wait_seconds);
    const delivery: TestRingOutcome = outcome.rung
      ? 'written'
      : outcome.reason === 'no_session' || outcome.reason === 'no_stream'
        ? outcome.reason
        : 'write_failed';
    await recordTestDelivery(this.sql, testId, {
      delivery,
      at: this.clock.now(),
      sessionId: outcome.rung ? outcome.session.id : null,
      clientName: outcome.rung ? outcome.session.clientInfo.name : (session?.clientInfo.name ?? null),
      ringId: outcome.rung ? outcome.ringId : null,
    });
    this.log.info({ endpoint_id: row.endpoint_id, test_id: testId, delivery }, 'self-test doorbell');
  }

  #later(ms: number, fn: () => Promise<void>): void {
    const timer = setTimeout(() => {
      this.#timers.delete(timer);
      fn().catch((err: unknown) => this.log.error({ stage: 'self-test ring', err: (err as Error).message }, 'self-test ring failed'));
    }, ms);
    timer.unref();
    this.#timers.add(timer);
  }
}

function firstClientName(capability: unknown): string | null {
  const sessions = (capability as { sessions?: { client_name?: string }[] } | null)?.sessions;
  return sessions?.[0]?.client_name ?? null;
}

/** Whether the test todo was claimed before its doorbell was written (or without one being written). */
export const claimedFirst = (t: Pick<SelfTestRow, 'delivery' | 'delivered_at' | 'claimed_at'>): boolean =>
  t.claimed_at !== null && (t.delivered_at === null || (t.delivery === 'written' && t.claimed_at < t.delivered_at));

/** The verdict table of SPEC-0025 REQ-8. */
export function verdictOf(t: Pick<SelfTestRow, 'delivery' | 'delivered_at' | 'claimed_at' | 'wait_seconds'>, now: Date): Verdict {
  // A claim before the doorbell was written (e.g. of the todo_id test_doorbell returned) heard nothing.
  if (claimedFirst(t)) return 'unheard';
  if (t.delivery === null || t.delivered_at === null) return 'pending';
  if (t.delivery !== 'written') return t.delivery;
  const deadline = t.delivered_at.getTime() + t.wait_seconds * 1000;
  if (t.claimed_at && t.claimed_at.getTime() <= deadline) return 'pass';
  return now.getTime() < deadline ? 'pending' : 'unheard';
}
