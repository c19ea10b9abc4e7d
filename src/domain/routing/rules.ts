import { z } from 'zod';
import { invalidArgument } from '../errors.ts';
import { parseInput } from '../validate.ts';
import { validateQueueName } from '../scope.ts';

// A webhook's routing rules as an operator writes them: an ordered list of {name, when, action},
// first match wins, else the default action; no rules at all is today's behaviour (the webhook's
// target queue). Only the shape is checked here; the expressions are compiled by expression.ts and
// the queues and endpoints are checked against the owner's scope by the webhooks service.

export const MAX_RULES = 32;
export const MAX_EXPRESSION_BYTES = 4096;
export const MAX_PARAMS_BYTES = 16 * 1024;
export const MAX_FANOUT_TARGETS = 8;
const RULE_NAME = /^[A-Za-z0-9][A-Za-z0-9 ._:-]{0,63}$/;

/** What a matching rule (or the default) does with a delivery. */
export type RouteAction =
  | { drop: true }
  | {
      /** The queue of the todo(s); for the owner, one its scope grants. */
      queue: string;
      /** Fan-out: endpoints (slugs) of the webhook owner's human, one todo each; absent = the owner only. */
      endpoints?: string[];
      /** At most one live todo per subject (issue or pull request) per queue; later deliveries are repeats. */
      once?: boolean;
    };

export interface RoutingRule {
  name: string;
  when: string;
  action: RouteAction;
}

/** Everything routing reads from a webhook, as stored. */
export interface RoutingConfig {
  rules: RoutingRule[];
  /** Operator-set values the expressions read as `params` (one rule serves several bots). */
  params: Record<string, unknown>;
  /** What a delivery no rule matched becomes; null: a todo in the webhook's target queue. */
  defaultAction: RouteAction | null;
}

export const EMPTY_ROUTING: RoutingConfig = { rules: [], params: {}, defaultAction: null };

const queue = z.string({ error: 'must be a queue name' });

const actionSchema = z.union(
  [
    z.object({ drop: z.literal(true, { error: 'must be true' }) }).strict(),
    z
      .object({
        queue,
        endpoints: z
          .array(z.string({ error: 'each must be an endpoint slug or id' }), { error: 'must be a list of endpoint slugs or ids' })
          .min(1, 'must name at least one endpoint')
          .max(MAX_FANOUT_TARGETS, `at most ${MAX_FANOUT_TARGETS} endpoints`)
          .optional(),
        once: z.boolean({ error: 'must be true or false' }).optional(),
      })
      .strict(),
  ],
  { error: 'must be {"queue": ...} (with "endpoints" and "once" if wanted) or {"drop": true}' },
);

const ruleSchema = z
  .object({
    name: z.string({ error: 'is required and must be a string' }).regex(RULE_NAME, 'must be 1-64 characters: letters, digits, space, ".", "_", ":" or "-"'),
    when: z
      .string({ error: 'is required and must be an expression' })
      .min(1, 'must not be empty')
      .refine((w) => Buffer.byteLength(w) <= MAX_EXPRESSION_BYTES, `must be at most ${MAX_EXPRESSION_BYTES} bytes`),
    action: actionSchema,
  })
  .strict();

/** The body of a rules write: every field optional; an omitted one keeps what is stored, `null` clears it. */
const updateSchema = z
  .object({
    rules: z.array(ruleSchema, { error: 'must be a list of rules' }).max(MAX_RULES, `at most ${MAX_RULES} rules`).nullable().optional(),
    params: z.record(z.string(), z.unknown(), { error: 'must be an object' }).nullable().optional(),
    default_action: actionSchema.nullable().optional(),
  })
  .strict();

export type RoutingUpdate = z.infer<typeof updateSchema>;

/**
 * Reads a rules write: shapes checked (each problem names its field, `rules.3.when`), queue names
 * valid, rule names unique, params within 16 KiB. Omitting `params` (or any field) keeps it, only
 * `null` clears it: the fixed semantics (the system we restate cleared omitted params).
 */
export function parseRoutingUpdate(input: unknown): RoutingUpdate {
  const update = parseInput(updateSchema, input);
  const seen = new Set<string>();
  update.rules?.forEach((r, i) => {
    if (seen.has(r.name)) throw invalidArgument(`rules.${i}.name`, `"${r.name}" names another rule too; names must be unique`);
    seen.add(r.name);
    if ('queue' in r.action) validateQueueName(`rules.${i}.action.queue`, r.action.queue);
  });
  if (update.default_action && 'queue' in update.default_action) validateQueueName('default_action.queue', update.default_action.queue);
  if (update.params && Buffer.byteLength(JSON.stringify(update.params)) > MAX_PARAMS_BYTES) {
    throw invalidArgument('params', `must be at most ${MAX_PARAMS_BYTES} bytes as JSON`);
  }
  return update;
}

/** The stored configuration after an update: omitted fields kept, null ones cleared. */
export function applyRoutingUpdate(current: RoutingConfig, update: RoutingUpdate): RoutingConfig {
  return {
    rules: update.rules === undefined ? current.rules : (update.rules ?? []),
    params: update.params === undefined ? current.params : (update.params ?? {}),
    defaultAction: update.default_action === undefined ? current.defaultAction : (update.default_action ?? null),
  };
}

/** Every queue an action asks for, and the endpoints it names, with the field each came from. */
export function actionTargets(config: RoutingConfig): { field: string; queue: string; endpoints: string[] | null }[] {
  const out: { field: string; queue: string; endpoints: string[] | null }[] = [];
  config.rules.forEach((r, i) => {
    if ('queue' in r.action) out.push({ field: `rules.${i}.action`, queue: r.action.queue, endpoints: r.action.endpoints ?? null });
  });
  if (config.defaultAction && 'queue' in config.defaultAction) {
    out.push({ field: 'default_action', queue: config.defaultAction.queue, endpoints: config.defaultAction.endpoints ?? null });
  }
  return out;
}
