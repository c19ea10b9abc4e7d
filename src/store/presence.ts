import type { Sql } from '../db/connect.ts';
import type { Presence, PresenceChangeReason, PresenceSource } from '../domain/presence/index.ts';
import { notify, presenceNotifyPerRow } from './channels.ts';

/** The stored presence columns of one endpoint, as the pure presence package reads them. */
export interface PresenceRow {
  id: string;
  slug: string;
  state: 'active' | 'revoked';
  shift: string | null;
  presence_override: 'in' | 'out' | null;
  override_until: Date | null;
  override_set_at: Date | null;
  override_by: string | null;
  presence_seen: 'in' | 'out';
  presence_changed_at: Date | null;
  presence_changed_by: string | null;
  /** The digest reason of the last claimed transition (clock_in, operator, shift_start, override_end). */
  presence_change_reason: string | null;
}

const presenceColumns = (sql: Sql) => sql`
  e.id, e.slug, e.state, e.shift, e.presence_override, e.override_until, e.override_set_at, e.override_by,
  e.presence_seen, e.presence_changed_at, e.presence_changed_by, e.presence_change_reason`;

/** By endpoint id: callers have already resolved the endpoint within their own reach. */
export async function readPresence(sql: Sql, endpointId: string): Promise<PresenceRow | null> {
  const [row] = await sql<PresenceRow[]>`select ${presenceColumns(sql)} from endpoints e where e.id = ${endpointId}`;
  return row ?? null;
}

export async function readPresenceMany(sql: Sql, endpointIds: readonly string[]): Promise<PresenceRow[]> {
  if (endpointIds.length === 0) return [];
  return sql<PresenceRow[]>`
    select ${presenceColumns(sql)} from endpoints e where e.id = any(${sql.array([...endpointIds])}::uuid[])`;
}

/** Active endpoints whose presence may differ from the default: the evaluator's worklist. */
export async function presenceWatchlistUnscoped(sql: Sql): Promise<PresenceRow[]> {
  return sql<PresenceRow[]>`
    select ${presenceColumns(sql)} from endpoints e
    where e.state = 'active' and (e.shift is not null or e.presence_override is not null or e.presence_seen <> 'in')`;
}

export interface OverrideColumns {
  override: 'in' | 'out' | null;
  overrideUntil: Date | null;
  overrideSetAt: Date | null;
  overrideBy: string | null;
}

/** Who writes presence inputs (`agent` or `operator:<human_id>`) and when: recorded on the row. */
export interface PresenceWriter {
  by: string;
  at: Date;
}

type InputColumns = Pick<PresenceRow, 'shift' | 'presence_override' | 'override_until' | 'override_set_at' | 'override_by'>;

/** One stored write: the endpoint's slug and its presence inputs just before and just after it. */
export interface PresenceWrite {
  slug: string;
  before: InputColumns;
  after: InputColumns;
}

/**
 * Applies `set` to an active endpoint's presence inputs, recording who and when, and answers the
 * inputs before and after (the row is locked between the two); null when the endpoint is not active.
 */
async function writePresence(sql: Sql, endpointId: string, change: { override: OverrideColumns } | { shift: string | null }, writer: PresenceWriter): Promise<PresenceWrite | null> {
  const set =
    'shift' in change
      ? sql`shift = ${change.shift}`
      : sql`presence_override = ${change.override.override}, override_until = ${change.override.overrideUntil},
          override_set_at = ${change.override.overrideSetAt}, override_by = ${change.override.overrideBy}`;
  const [row] = await sql<(InputColumns & { slug: string } & { [K in keyof InputColumns as `old_${K}`]: InputColumns[K] })[]>`
    with old as (
      select id, shift, presence_override, override_until, override_set_at, override_by
      from endpoints where id = ${endpointId} and state = 'active' for update
    )
    update endpoints e set ${set}, presence_written_at = ${writer.at}, presence_written_by = ${writer.by}
    from old where e.id = old.id and e.state = 'active'
    returning e.slug, e.shift, e.presence_override, e.override_until, e.override_set_at, e.override_by,
      old.shift as old_shift, old.presence_override as old_presence_override, old.override_until as old_override_until,
      old.override_set_at as old_override_set_at, old.override_by as old_override_by`;
  if (!row) return null;
  return {
    slug: row.slug,
    before: {
      shift: row.old_shift,
      presence_override: row.old_presence_override,
      override_until: row.old_override_until,
      override_set_at: row.old_override_set_at,
      override_by: row.old_override_by,
    },
    after: {
      shift: row.shift,
      presence_override: row.presence_override,
      override_until: row.override_until,
      override_set_at: row.override_set_at,
      override_by: row.override_by,
    },
  };
}

/** Writes the override of an active endpoint; null when the endpoint is not active. */
export function writeOverride(sql: Sql, endpointId: string, o: OverrideColumns, writer: PresenceWriter): Promise<PresenceWrite | null> {
  return writePresence(sql, endpointId, { override: o }, writer);
}

/** Stores a shift (its canonical form) or clears it; null when the endpoint is not active. */
export function writeShift(sql: Sql, endpointId: string, canonicalShift: string | null, writer: PresenceWriter): Promise<PresenceWrite | null> {
  return writePresence(sql, endpointId, { shift: canonicalShift }, writer);
}

export interface PresenceTransition {
  endpointId: string;
  to: 'in' | 'out';
  by: string;
  /** Why, as the digest says it: stored with the claim so every instance's digest agrees. */
  reason: string;
  /** The inputs the transition was computed from: the claim applies only while they still hold. */
  from: { override: 'in' | 'out' | null; overrideSetAt: Date | null; shift: string | null };
  /**
   * The override in `from` ran out: the claim clears it in the same update. Cleared apart, before
   * the claim, another instance could read the row in between and take the return for a shift start.
   */
  clearOverride?: boolean;
  /**
   * The presence history row the claim writes in the same statement (issue 39): the presence it
   * leaves, what decides from now on, until when, and why. Only a won claim writes one.
   */
  record: { from: Presence; source: PresenceSource; until: Date | null; reason: PresenceChangeReason };
}

/**
 * Claims presence transitions in one statement: each row moves only if its presence_seen still
 * differs and its override and shift are still those the transition was computed from (a write in
 * between makes the claim stale), so across instances and restarts exactly one caller claims each
 * transition. Only the claimed rows are returned, and only they are broadcast on
 * `endpoint_presence` (at commit) and recorded in presence_history (the one place a change of
 * effective presence is written down, for writes and for time alike).
 */
export async function claimPresenceTransitions(sql: Sql, changes: readonly PresenceTransition[], now: Date): Promise<PresenceTransition[]> {
  if (changes.length === 0) return [];
  const wanted = changes.map((c) => ({
    id: c.endpointId,
    to_presence: c.to,
    by_whom: c.by,
    reason: c.reason,
    override: c.from.override,
    set_at: c.from.overrideSetAt?.toISOString() ?? null,
    shift: c.from.shift,
    clear_override: c.clearOverride ?? false,
    from_presence: c.record.from,
    source: c.record.source,
    until: c.record.until?.toISOString() ?? null,
    change_reason: c.record.reason,
  }));
  const rows = await sql<{ id: string }[]>`
    with wanted as (
      select * from jsonb_to_recordset(${sql.json(wanted)})
        as w(id uuid, to_presence text, by_whom text, reason text, override text, set_at timestamptz, shift text, clear_override boolean,
          from_presence text, source text, until timestamptz, change_reason text)
    ), claimed as (
      update endpoints e set presence_seen = w.to_presence, presence_changed_at = ${now}, presence_changed_by = w.by_whom,
        presence_change_reason = w.reason,
        presence_override = case when w.clear_override then null else e.presence_override end,
        override_until = case when w.clear_override then null else e.override_until end,
        override_set_at = case when w.clear_override then null else e.override_set_at end,
        override_by = case when w.clear_override then null else e.override_by end
      from wanted w
      where e.id = w.id and e.presence_seen <> w.to_presence
        and e.presence_override is not distinct from w.override
        and e.override_set_at is not distinct from w.set_at
        and e.shift is not distinct from w.shift
      returning e.id, w.to_presence as to
    ), recorded as (
      insert into presence_history (endpoint_id, at, from_presence, to_presence, source, changed_by, reason, until)
      select w.id, ${now}, w.from_presence, w.to_presence, w.source, w.by_whom, w.change_reason, w.until
      from claimed c join wanted w on w.id = c.id
    )
    select c.id, ${presenceNotifyPerRow(sql, 'c.id', 'c.to')} from claimed c`;
  const won = new Set(rows.map((r) => r.id));
  return changes.filter((c) => won.has(c.endpointId));
}

/**
 * Tells every instance to re-read an endpoint's presence after an override or shift was written.
 * `<id>:refresh` only refreshes caches; transitions are broadcast by claimPresenceTransition.
 */
export async function notifyPresenceWritten(sql: Sql, endpointId: string): Promise<void> {
  await notify(sql, 'endpoint_presence', { endpointId, change: 'refresh' });
}

/** Clears an override that no longer decides, unless someone wrote a newer one meanwhile. */
export async function clearDeadOverride(sql: Sql, endpointId: string, setAt: Date | null): Promise<void> {
  await sql`
    update endpoints set presence_override = null, override_until = null, override_set_at = null, override_by = null
    where id = ${endpointId} and presence_override is not null and override_set_at is not distinct from ${setAt}`;
}
