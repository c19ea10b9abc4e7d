// Which of an endpoint's sessions hears a doorbell: the one decision, used by every ring (a todo's,
// a self-test's, a digest) and by the instance deciding whether to compete for a ring at all.
//
// A doorbell is a model turn for the agent that hears it and a lost ring for one that does not, so
// the session most likely to act on it comes first. Real clients keep sessions that never will: a
// proxy's probe (mcp-remote opens one per run that holds a stream and forwards nothing), an
// inspector's call. Those are told apart by what they have done, not by who they say they are.

/** What the choice looks at, per session. */
export interface RingCandidate {
  /** When its open stream attached, or null when it has none (a write to it cannot land). */
  streamAttachedAt: Date | null;
  /** When it last acknowledged a ring (a claim or ack_doorbell), or null. */
  lastAckAt: Date | null;
  /** It has listed or called tools since `initialize` (a proxy's probe never does). */
  calledTool: boolean;
  /** Its last 3 real rings went unheard (SPEC-0025 REQ-5). */
  unheard: boolean;
}

/**
 * Why a session was chosen, as ring records and the board say it:
 * - `acknowledged_last`: it acknowledged a ring more recently than any other streaming session;
 * - `newest_stream`: no streaming session has acknowledged one; of those that listed or called tools, its stream is the newest;
 * - `never_called_tool`: no streaming session has listed or called tools; its stream is the newest;
 * - `unheard_only`: every streaming session is marked unheard;
 * - `no_stream`: no session has a stream (a write cannot land; never recorded as a ring).
 */
export type RingChoiceReason = 'acknowledged_last' | 'newest_stream' | 'never_called_tool' | 'unheard_only' | 'no_stream';

export const RING_CHOICE_REASONS: readonly RingChoiceReason[] = ['acknowledged_last', 'newest_stream', 'never_called_tool', 'unheard_only', 'no_stream'];

/** The reasons in words, for the board and the CLI. */
export const RING_CHOICE_WORDS: Record<RingChoiceReason, string> = {
  acknowledged_last: 'it acknowledged a doorbell most recently',
  newest_stream: 'newest stream of a session that has listed or called tools',
  never_called_tool: 'no streaming session has listed or called tools yet; newest stream',
  unheard_only: 'every streaming session is marked unheard',
  no_stream: 'no session has an open stream',
};

const tierOf = (c: RingCandidate): number => {
  if (c.streamAttachedAt === null) return 4;
  if (c.unheard) return 3;
  if (!c.calledTool) return 2;
  return c.lastAckAt ? 0 : 1;
};

const REASON_OF_TIER: readonly RingChoiceReason[] = ['acknowledged_last', 'newest_stream', 'never_called_tool', 'unheard_only', 'no_stream'];

const time = (d: Date | null): number => (d ? d.getTime() : -Infinity);

/** Best first: within a tier, the latest acknowledgement, then the newest stream. */
function compare(a: RingCandidate, b: RingCandidate): number {
  return tierOf(a) - tierOf(b) || time(b.lastAckAt) - time(a.lastAckAt) || time(b.streamAttachedAt) - time(a.streamAttachedAt);
}

export interface RankedCandidate<T> {
  candidate: T;
  reason: RingChoiceReason;
}

/**
 * The sessions in the order a ring tries them, each with the reason it would be chosen if every
 * one before it refused the write (a full buffer). Ties keep the input order, so callers that pass
 * a stable order (by id) get a stable choice.
 */
export function rankRingCandidates<T extends RingCandidate>(candidates: readonly T[]): RankedCandidate<T>[] {
  return [...candidates].sort(compare).map((candidate) => ({ candidate, reason: REASON_OF_TIER[tierOf(candidate)]! }));
}


/** How good the best of these is: 0 (acknowledged) .. 4 (none streaming); lower is better. */
export const bestTier = (candidates: readonly RingCandidate[]): number => Math.min(4, ...candidates.map(tierOf));
