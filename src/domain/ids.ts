/**
 * Ids as they travel: a UUID (endpoints, webhooks, hooks, human tokens) and a todo id (`td_` and a
 * UUID). A string that is not one is a missing row, never a query: PostgreSQL would refuse it.
 */
export const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
export const TODO_ID_PATTERN = /^td_[0-9a-f-]{36}$/;

export const isUuid = (s: string): boolean => UUID_PATTERN.test(s);
export const isTodoId = (s: string): boolean => TODO_ID_PATTERN.test(s);
