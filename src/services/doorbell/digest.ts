import type { BacklogTodo } from '../../store/todos/index.ts';
import { CHANNEL_METHOD, neutralizeChannelText, type ChannelNotification } from '../../domain/doorbell-notification.ts';

export type DigestReason = 'clock_in' | 'operator' | 'shift_start' | 'override_end' | 'reconnect';

function age(ms: number): string {
  const minutes = Math.max(0, Math.floor(ms / 60_000));
  if (minutes < 60) return `${minutes}m`;
  const hours = Math.floor(minutes / 60);
  if (hours < 48) return `${hours}h ${minutes % 60}m`;
  return `${Math.floor(hours / 24)}d ${hours % 24}h`;
}

/**
 * The digest doorbell: one line of counts, per-queue counts and the oldest age. Only counts,
 * queue names (neutralized) and the reason: never a title, payload or todo id.
 */
export function digestDoorbell(backlog: readonly BacklogTodo[], reason: DigestReason, now: Date, ringId?: string): ChannelNotification {
  const perQueue = new Map<string, number>();
  for (const t of backlog) perQueue.set(t.queue, (perQueue.get(t.queue) ?? 0) + 1);
  const queues = [...perQueue.keys()].map(neutralizeChannelText).sort();
  const counts = [...perQueue.entries()]
    .map(([q, n]) => [neutralizeChannelText(q), n] as const)
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([q, n]) => `${q}: ${n}`)
    .join(', ');
  const oldest = backlog.reduce((min, t) => Math.min(min, t.created_at.getTime()), now.getTime());
  const n = backlog.length;
  const content =
    `Switchboard digest: ${n} todo${n === 1 ? '' : 's'} waiting (${counts}); the oldest has waited ${age(now.getTime() - oldest)}. ` +
    'Take them singly: call claim_next to claim a single todo, do its work, complete it (or fail or release it), then call claim_next again, until it answers {"empty": true}. ' +
    'Do not claim several at a time: each claim holds its own 300 s lease.';
  return {
    jsonrpc: '2.0',
    method: CHANNEL_METHOD,
    params: { content, meta: { kind: 'digest', pending: String(n), queues: queues.join(','), reason, ...(ringId ? { ring_id: ringId } : {}) } },
  };
}
