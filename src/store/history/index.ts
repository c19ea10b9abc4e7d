export { HOUR_HISTORY_MS, MINUTE_HISTORY_MS, foldHistoryDeltasUnscoped, pruneHistoryUnscoped } from './maintain.ts';
export { historyOf, humanQueueHistoryOf, pendingDepthOf, queueHistoryOf, webhookDeliveriesOf, type DepthNow, type HistoryRow, type HistoryWindow } from './read.ts';
