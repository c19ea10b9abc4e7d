export { presenceChangeBefore } from './before.ts';
export { listPresenceChanges } from './list.ts';
export { deleteOldPresenceHistoryUnscoped, PRESENCE_HISTORY_KEEP_MS } from './prune.ts';
export type { PresenceChangeRow } from './row.ts';
