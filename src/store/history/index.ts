export { HOUR_HISTORY_MS, MINUTE_HISTORY_MS, foldHistoryDeltasUnscoped, pruneHistoryUnscoped, rollUpHoursUnscoped, snapshotDepthUnscoped } from './maintain.ts';
export { historyOf, pendingDepthOf, queueHistoryOf, webhookDeliveriesOf, type HistoryRow, type HistoryWindow } from './read.ts';
