import { describe, expect, it } from 'vitest';
import { bestTier, rankRingCandidates, type RingCandidate } from './doorbell-choice.ts';

const at = (minute: number) => new Date(Date.UTC(2026, 11, 5, 10, minute));
const session = (name: string, c: Partial<RingCandidate>): RingCandidate & { name: string } => ({
  name,
  streamAttachedAt: at(0),
  lastAckAt: null,
  calledTool: true,
  unheard: false,
  ...c,
});
const order = (cs: (RingCandidate & { name: string })[]) => rankRingCandidates(cs).map((r) => `${r.candidate.name}:${r.reason}`);

describe('rankRingCandidates: the session most likely to hear a doorbell first', () => {
  it('prefers the session that acknowledged a ring most recently, over a newer stream', () => {
    const older = session('acked-at-5', { streamAttachedAt: at(1), lastAckAt: at(5) });
    const latest = session('acked-at-9', { streamAttachedAt: at(2), lastAckAt: at(9) });
    const fresh = session('new-stream', { streamAttachedAt: at(30) });
    expect(order([older, fresh, latest])).toEqual(['acked-at-9:acknowledged_last', 'acked-at-5:acknowledged_last', 'new-stream:newest_stream']);
  });

  it('then the newest stream among sessions that called a tool', () => {
    expect(order([session('old', { streamAttachedAt: at(1) }), session('new', { streamAttachedAt: at(7) })])).toEqual(['new:newest_stream', 'old:newest_stream']);
  });

  it("ranks a session that never called a tool after initialize (a proxy's probe) below every one that did, whatever its stream's age", () => {
    const probe = session('probe', { streamAttachedAt: at(50), calledTool: false });
    const agent = session('agent', { streamAttachedAt: at(1) });
    expect(order([probe, agent])).toEqual(['agent:newest_stream', 'probe:never_called_tool']);
    // With no session that called a tool, the newest untried stream goes first.
    const older = session('older-probe', { streamAttachedAt: at(3), calledTool: false });
    expect(order([older, probe])).toEqual(['probe:never_called_tool', 'older-probe:never_called_tool']);
  });

  it('chooses an unheard session only when no other session has a stream', () => {
    const unheard = session('unheard', { streamAttachedAt: at(40), lastAckAt: at(39), unheard: true });
    const probe = session('probe', { streamAttachedAt: at(1), calledTool: false });
    const streamless = session('streamless', { streamAttachedAt: null, lastAckAt: at(45) });
    expect(order([unheard, streamless, probe])).toEqual(['probe:never_called_tool', 'unheard:unheard_only', 'streamless:no_stream']);
    expect(order([streamless, unheard])).toEqual(['unheard:unheard_only', 'streamless:no_stream']);
  });

  it('keeps the given order between equals, and ranks nothing from nothing', () => {
    const a = session('a', {});
    const b = session('b', {});
    expect(order([a, b])).toEqual(['a:newest_stream', 'b:newest_stream']);
    expect(order([b, a])).toEqual(['b:newest_stream', 'a:newest_stream']);
    expect(rankRingCandidates([])).toEqual([]);
  });

  it('bestTier compares what two groups of sessions offer (lower is better)', () => {
    expect(bestTier([session('acked', { lastAckAt: at(1) })])).toBeLessThan(bestTier([session('tool', {})]));
    expect(bestTier([session('tool', {})])).toBeLessThan(bestTier([session('probe', { calledTool: false })]));
    expect(bestTier([session('probe', { calledTool: false })])).toBeLessThan(bestTier([session('unheard', { unheard: true })]));
    expect(bestTier([])).toBe(bestTier([session('none', { streamAttachedAt: null })]));
  });
});
