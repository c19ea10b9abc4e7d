// The todo aggregate: row and wire forms, the shared predicates, and every statement on todos.
export { TODO_STATES, fullTodo, newTodoId, summarizeTodo, type Moved, type TodoRow, type TodoState, type TodoSummary } from './row.ts';
export { claimable, isPushEligible, leaseExpired, live, liveKey, pushEligible, retryDue } from './predicates.ts';
export { insertEventAndTodo, type EventInput, type NewTodo } from './insert.ts';
export type { Caller } from './reach.ts';
export { SELF_TEST_RESULT, claimNextTodo, claimOwnTestTodo, claimTodo, type ClaimedTodo } from './claim.ts';
export { completeTodo, failTodo, heartbeatTodo, releaseTodo } from './transitions.ts';
export { reapExpiredLeasesUnscoped, requeueDueRetriesUnscoped } from './sweeps.ts';
export { getTodo, listTodos, queueStatsUnscoped, todoQueueUnscoped, type ListFilter } from './reads.ts';
export {
  RING_BUDGET,
  RING_INTERVALS_SECONDS,
  SWEEP_LIMIT,
  chargeDueRingsUnscoped,
  freshReadyTodos,
  freshReadyTodosOf,
  markDigestRung,
  pushEligibleBacklog,
  pushEligibleCount,
  pushEligibleTodosByIds,
  type BacklogTodo,
} from './push.ts';
