import type { Sql } from '../../db/connect.ts';
import type { Clock } from '../../lib/clock.ts';
import type { Logger } from '../../lib/log.ts';
import { deleteFinishedTodosUnscoped, deleteOldReplayKeysUnscoped, deleteOrphanEventsUnscoped, deleteTodolessEventsUnscoped, type EventWalkPosition } from '../../store/retention.ts';
import { deleteExpiredOAuthRowsUnscoped } from '../../store/oauth/index.ts';
import { deleteOldPresenceHistoryUnscoped, PRESENCE_HISTORY_KEEP_MS } from '../../store/presence-history/index.ts';
import { deleteOldWebhookRefusalsUnscoped } from '../../store/webhook-refusals.ts';
import type { MaintenanceLoop } from './loop.ts';

/**
 * A pass a minute, each held to RETENTION_PASS_BUDGET_MS: at 100,000 endpoints a pass of ten
 * batches of every kind took 1.7 s, one every 10 minutes; a minute's worth past the window is
 * small, and a backlog drains at up to a budget's worth a minute (issue 40, bench/loops.ts).
 */
export const RETENTION_INTERVAL_MS = 60_000;
/** Rows one statement deletes: short transactions, so claims and pushes never wait long behind one. */
export const RETENTION_BATCH = 1_000;
/** Statements of each kind one tick may run; a backlog larger than this drains over several ticks. */
export const RETENTION_BATCHES_PER_TICK = 10;
/**
 * Wall-clock time (pacing, like the loop's interval) after which a pass starts no further batch of
 * a kind that already ran one: every kind gets a batch each pass, then only while the pass is
 * within this; a backlog left over is the next pass's (`more`).
 */
export const RETENTION_PASS_BUDGET_MS = 500;
/** Events the walk for orphans reads a pass (store deleteOrphanEventsUnscoped). */
export const RETENTION_WALK_EVENTS = 2 * RETENTION_BATCH;

export interface RetentionDeps {
  sql: Sql;
  clock: Clock;
  log: Logger;
  /**
   * SWITCHBOARD_RETENTION: how long finished todos, their events and replay keys are kept. Not ring
   * records nor self-test reports: those live exactly 7 days whatever it says (SPEC-0025 REQ-1,
   * REQ-8), deleted by the self-test housekeeping loop.
   */
  retentionMs: number;
  batch?: number;
  batchesPerTick?: number;
  /** RETENTION_PASS_BUDGET_MS and RETENTION_WALK_EVENTS unless given. */
  budgetMs?: number;
  walkEvents?: number;
  /** Where the walk for orphan events goes on from (the loop keeps one); absent: from the oldest, each pass. */
  walk?: RetentionWalk;
}

/** The orphan-event walk's position between passes (store deleteOrphanEventsUnscoped). */
export interface RetentionWalk {
  orphanEventsAfter: EventWalkPosition | null;
}

export interface RetentionPass {
  todos: number;
  events: number;
  /** Signed bodies' replay keys past the window. */
  replayKeys: number;
  /** OAuth tokens, codes and revoked grants past the window (the largest of the three counts per batch). */
  oauth: number;
  /** Presence history rows older than 30 days (whatever the retention). */
  presenceHistory: number;
  /** Minutes of webhook refusal counts past the window (kept as long as the events). */
  webhookRefusals: number;
  /** True when a kind still had a full batch at the tick's end (more is waiting). */
  more: boolean;
}

/**
 * One retention pass: finished todos (done, or failed with no retry left) last changed before
 * now - retention and their events, then events routing recorded without a todo, then a stretch
 * of the walk for any other event no todo points at (RETENTION_WALK_EVENTS read, going on
 * from where the last pass stopped: the old events live todos keep are not read again every
 * pass), then replay keys, then webhook refusal counts, then OAuth
 * tokens, codes and revoked grants past the same window, then presence history older than 30
 * days (its own window, whatever the retention); each in
 * batches until a batch comes back short or the tick's budget is spent (batchesPerTick of each
 * kind, and after a kind's first batch RETENTION_PASS_BUDGET_MS of the pass). Safe on every instance.
 * Ring records and self-test reports are not retention's: they are kept 7 days (SPEC-0025).
 */
export async function retentionPass(deps: RetentionDeps): Promise<RetentionPass> {
  const { sql, clock, log, retentionMs, batch = RETENTION_BATCH, batchesPerTick = RETENTION_BATCHES_PER_TICK, budgetMs = RETENTION_PASS_BUDGET_MS, walkEvents = RETENTION_WALK_EVENTS } = deps;
  const cutoff = new Date(clock.now().getTime() - retentionMs);
  const out: RetentionPass = { todos: 0, events: 0, replayKeys: 0, oauth: 0, presenceHistory: 0, webhookRefusals: 0, more: false };
  const started = performance.now();
  const drain = async (step: () => Promise<number>): Promise<void> => {
    for (let i = 0; i < batchesPerTick; i++) {
      if (i > 0 && performance.now() - started >= budgetMs) {
        out.more = true;
        return;
      }
      const n = await step();
      if (n < batch) return;
    }
    out.more = true;
  };
  await drain(async () => {
    const { todos, events } = await deleteFinishedTodosUnscoped(sql, cutoff, batch);
    out.todos += todos;
    out.events += events;
    return todos;
  });
  await drain(async () => {
    const n = await deleteTodolessEventsUnscoped(sql, cutoff, batch);
    out.events += n;
    return n;
  });
  const walk = deps.walk ?? { orphanEventsAfter: null };
  const orphans = await deleteOrphanEventsUnscoped(sql, cutoff, walkEvents, walk.orphanEventsAfter);
  out.events += orphans.deleted;
  walk.orphanEventsAfter = orphans.reached;
  await drain(async () => {
    const n = await deleteOldReplayKeysUnscoped(sql, cutoff, batch);
    out.replayKeys += n;
    return n;
  });
  await drain(async () => {
    const n = await deleteOldWebhookRefusalsUnscoped(sql, cutoff, batch);
    out.webhookRefusals += n;
    return n;
  });
  await drain(async () => {
    const n = await deleteExpiredOAuthRowsUnscoped(sql, cutoff, batch);
    out.oauth += n;
    return n;
  });
  const presenceCutoff = new Date(clock.now().getTime() - PRESENCE_HISTORY_KEEP_MS);
  await drain(async () => {
    const n = await deleteOldPresenceHistoryUnscoped(sql, presenceCutoff, batch);
    out.presenceHistory += n;
    return n;
  });
  if (out.todos || out.events || out.replayKeys || out.oauth || out.presenceHistory || out.webhookRefusals) log.info({ ...out, cutoff: cutoff.toISOString() }, 'retention pass');
  return out;
}

export const retentionLoop = (deps: RetentionDeps): MaintenanceLoop => {
  const walk: RetentionWalk = deps.walk ?? { orphanEventsAfter: null };
  return {
    name: 'retention',
    intervalMs: RETENTION_INTERVAL_MS,
    tick: () => retentionPass({ ...deps, walk }),
  };
};
