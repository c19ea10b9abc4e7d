import { forbidden, invalidArgument } from './errors.ts';

/**
 * What an endpoint may be granted. Scope is fixed at vend time: queues the endpoint may read and
 * claim from, and the verbs (MCP tools) it may call. Self verbs are never stored in a scope: every
 * active endpoint has them.
 */
export const DRAIN_VERBS = [
  'list_todos',
  'get_todo',
  'claim',
  'claim_next',
  'heartbeat',
  'complete',
  'fail',
  'release',
] as const;
/** The rules verbs are their own grants: create_webhook alone never reached a webhook the human made on the endpoint. */
export const WEBHOOK_VERBS = ['create_webhook', 'list_webhooks', 'rotate_webhook', 'delete_webhook', 'get_webhook_rules', 'set_webhook_rules', 'test_webhook_rules'] as const;
export const NOTIFY_HOOK_VERBS = ['create_notify_hook', 'list_notify_hooks', 'rotate_notify_hook', 'delete_notify_hook'] as const;
export const SELF_VERBS = ['clock_in', 'clock_out', 'presence', 'ack_doorbell', 'test_doorbell', 'get_doorbell_test', 'whoami'] as const;

export const GRANTABLE_VERBS: readonly string[] = [...DRAIN_VERBS, ...WEBHOOK_VERBS, ...NOTIFY_HOOK_VERBS];
/** Granted when a vend names no verbs: draining work. Outbound-call and webhook verbs must be asked for. */
export const DEFAULT_VERBS: readonly string[] = [...DRAIN_VERBS];
export const DEFAULT_QUEUES: readonly string[] = ['inbox'];

/** Reserved for quarantined deliveries; never readable, claimable or grantable by an agent. */
export const RESERVED_QUEUE = 'quarantine';
const QUEUE_NAME = /^[a-z0-9][a-z0-9._-]{0,62}$/;
export const MAX_SCOPE_QUEUES = 32;

export function validateQueueName(field: string, name: unknown): string {
  if (typeof name !== 'string' || !QUEUE_NAME.test(name)) {
    throw invalidArgument(
      field,
      `queue name ${JSON.stringify(name)} must be 1-63 characters of a-z, 0-9, '.', '_' or '-', starting with a letter or digit`,
    );
  }
  if (name === RESERVED_QUEUE) throw invalidArgument(field, `queue name "${RESERVED_QUEUE}" is reserved`);
  return name;
}

export function normalizeQueues(queues: readonly unknown[] | undefined): string[] {
  if (queues === undefined) return [...DEFAULT_QUEUES];
  if (queues.length === 0) throw invalidArgument('queues', 'at least one queue is required');
  if (queues.length > MAX_SCOPE_QUEUES) throw invalidArgument('queues', `at most ${MAX_SCOPE_QUEUES} queues`);
  const out = queues.map((q) => validateQueueName('queues', q));
  return [...new Set(out)];
}

export function normalizeVerbs(verbs: readonly unknown[] | undefined): string[] {
  if (verbs === undefined) return [...DEFAULT_VERBS];
  if (verbs.length === 0) throw invalidArgument('verbs', 'at least one verb is required');
  const out: string[] = [];
  for (const v of verbs) {
    if (typeof v !== 'string') throw invalidArgument('verbs', 'each verb must be a string');
    if ((SELF_VERBS as readonly string[]).includes(v)) {
      throw invalidArgument('verbs', `"${v}" is a self verb every endpoint always has; it cannot be granted`);
    }
    if (!GRANTABLE_VERBS.includes(v)) {
      throw invalidArgument('verbs', `unknown verb "${v}"; known verbs: ${GRANTABLE_VERBS.join(', ')}`);
    }
    if (!out.includes(v)) out.push(v);
  }
  // Stored in canonical order so two vends with the same grant look the same.
  return GRANTABLE_VERBS.filter((v) => out.includes(v));
}

/** An endpoint's queues, as the queue rule reads them. */
export interface QueueScope {
  slug: string;
  queues: readonly string[];
}

/**
 * The one rule for "the queue must be one of the endpoint's queues", for pushes, webhooks, notify
 * hooks and an agent's own calls. `requested` undefined takes the endpoint's only queue (several:
 * the field is required). A queue outside the scope is the agent's `forbidden` (it asked beyond
 * its grant) and an operator's `invalid_argument` naming the field (their input names a queue the
 * endpoint does not have); either way the message names the endpoint's queues.
 */
export function scopedQueue(scope: QueueScope, field: string, requested: unknown, asker: 'agent' | 'operator'): string {
  if (requested === undefined) {
    if (scope.queues.length === 1) return scope.queues[0]!;
    throw invalidArgument(field, `required, because endpoint ${scope.slug} has several queues (${scope.queues.join(', ')})`);
  }
  if (typeof requested !== 'string') throw invalidArgument(field, 'must be a queue name');
  if (!scope.queues.includes(requested)) {
    const why = `"${requested}" is not one of endpoint ${scope.slug}'s queues (${scope.queues.join(', ')})`;
    throw asker === 'agent' ? forbidden(`${field}: ${why}`) : invalidArgument(field, why);
  }
  return requested;
}
