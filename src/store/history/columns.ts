/**
 * A bucket's counts and its depth's net changes, as todo_history, todo_history_delta and
 * todo_history_human name them, in HistoryRow's order: what the fold adds up and the reads sum.
 */
export const COUNT_COLUMNS = ['created', 'claimed', 'completed', 'failed', 'dead', 'pending_change', 'claimed_change', 'rings_sent', 'heard_claim', 'heard_ack', 'unheard', 'digests'] as const;
