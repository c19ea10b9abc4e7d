import { isInShift, nextShiftBoundary, type Presence, type PresenceSource, type Shift } from './presence/index.ts';

// The presence band of the board's endpoint page (issue 39): a window cut into spans of one
// effective presence (in or out, and the source that decided it), from the kept presence changes,
// with the windows of the endpoint's shift to draw behind it. Pure: the caller passes the window,
// the rows and the shift.

export interface BandSpan {
  from: Date;
  to: Date;
  presence: Presence;
  /** What decided it; null for the span before the window's first change when no earlier change is kept. */
  source: PresenceSource | null;
}

export interface BandChange {
  at: Date;
  from: Presence;
  to: Presence;
  source: PresenceSource;
}

/**
 * Spans of presence over [since, until), starting no earlier than `startsAt` (the endpoint's
 * creation). The state at the start is the last change before the window (`before`), else the
 * `from` of the window's first change, else `current` (nothing changed since).
 */
export function presenceSpans(
  w: { since: Date; until: Date; startsAt?: Date },
  changes: readonly BandChange[],
  before: Pick<BandChange, 'to' | 'source'> | null,
  current: { presence: Presence; source: PresenceSource },
): BandSpan[] {
  const start = new Date(Math.max(w.since.getTime(), w.startsAt?.getTime() ?? 0));
  if (start >= w.until) return [];
  const inWindow = changes.filter((c) => c.at >= start && c.at < w.until).sort((a, b) => a.at.getTime() - b.at.getTime());
  let state: { presence: Presence; source: PresenceSource | null } = before
    ? { presence: before.to, source: before.source }
    : inWindow[0]
      ? { presence: inWindow[0].from, source: null }
      : current;
  const spans: BandSpan[] = [];
  let at = start;
  for (const c of inWindow) {
    if (c.at > at) spans.push({ from: at, to: c.at, ...state });
    state = { presence: c.to, source: c.source };
    at = c.at;
  }
  spans.push({ from: at, to: w.until, ...state });
  return spans;
}

/** The windows of `shift` (when it says in) that overlap [since, until), clipped to it. */
export function shiftWindows(shift: Shift | null, since: Date, until: Date): { from: Date; to: Date }[] {
  if (!shift) return [];
  const out: { from: Date; to: Date }[] = [];
  let t = since;
  while (t < until) {
    const inside = isInShift(shift, t);
    const next = nextShiftBoundary(shift, t);
    const end = next && next > t ? (next < until ? next : until) : until;
    if (inside) out.push({ from: t, to: end });
    t = end;
  }
  return out;
}
