// The todo aggregate: row and wire forms, the shared predicates, and every statement on todos.
export {
  TODO_STATES,
  TODO_STATE_FILTERS,
  detailTodo,
  fullTodo,
  isDead,
  newTodoId,
  routingOf,
  summarizeTodo,
  type Moved,
  type TodoDetail,
  type TodoMetaRow,
  type TodoRow,
  type TodoState,
  type TodoStateFilter,
  type TodoSummary,
} from './row.ts';
export { claimable, delayDue, isPushEligible, leaseExpired, live, liveKey, pushEligible, retryDue } from './predicates.ts';
export { insertEventAndTodo, type EventInput, type NewTodo } from './insert.ts';
export { insertFanOut, type FanOutOutcome, type FanOutSkip, type FanOutTodo, type FannedOut } from './fan-out.ts';
export { DeliveryBatches, MAX_DELIVERIES_PER_STATEMENT } from './delivery-batches.ts';
export type { Caller } from './reach.ts';
export { SELF_TEST_RESULT, claimOwnTestTodo, claimTodo, type ClaimedTodo } from './claim.ts';
export { ClaimNext, MAX_CLAIMS_PER_STATEMENT, claimNextTodo } from './claim-next.ts';
export { completeTodo, failTodo, heartbeatTodo, releaseTodo } from './transitions.ts';
export { HeldTransitions, MAX_TRANSITIONS_PER_STATEMENT } from './held-batches.ts';
export { FinishThenClaim, type Finish, type Finished, type NextClaim } from './finish-then-claim.ts';
export { reapExpiredLeasesUnscoped, releaseDueDelayedUnscoped, requeueDueRetriesUnscoped } from './sweeps.ts';
export { cancelTodo, retryTodo, type Canceler } from './operator.ts';
export { getTodo, listTodos, queueStatsUnscoped, todoQueueUnscoped, type ListFilter, type PageKey } from './reads.ts';
export {
  RETURN_DIGEST_GRACE_SECONDS,
  RING_BUDGET,
  RING_INTERVALS_SECONDS,
  SWEEP_LIMIT,
  chargeDueRingsUnscoped,
  freshReadyTodos,
  freshReadyTodosOf,
  pushEligibleBacklog,
  pushEligibleCount,
  pushEligibleTodosByIds,
} from './push.ts';
export {
  announceByDigest,
  ringReadyOnce,
  unannounced,
  type BacklogTodo,
  type DigestScope,
} from './announce.ts';
