import { compileWhen, type CompiledWhen } from './expression.ts';
import type { Envelope } from './envelope.ts';
import type { RouteAction, RoutingConfig } from './rules.ts';

// One decision per delivery: the first rule whose `when` is true decides, else the default action
// (null: the webhook's target queue). A rule that errors, answers something other than true or
// false, or takes longer than its budget stops evaluation: the delivery faults (fail closed: no
// todo, the producer is told to retry), which the system we restate got wrong (it failed open).

/** A rule may take this long on one delivery, all rules together this long (README: Routing rules). */
export const RULE_BUDGET_MS = 50;
export const DELIVERY_BUDGET_MS = 250;

export type FaultCause = 'error' | 'not_bool' | 'rule_budget' | 'delivery_budget';
export const FAULT_CAUSES: readonly FaultCause[] = ['error', 'not_bool', 'rule_budget', 'delivery_budget'];

export type RouteKind = 'queue' | 'drop' | 'fanout' | 'fault';
export const ROUTE_KINDS: readonly RouteKind[] = ['queue', 'drop', 'fanout', 'fault'];

/** Why a delivery became what it did: kept on its event and on every todo it made. */
export interface RouteTrace {
  stage: 'rule' | 'default';
  rule_index: number | null;
  rule_name: string | null;
  action: RouteKind;
  queue?: string;
  endpoints?: string[];
  once?: boolean;
  /** A fault's cause and message. */
  cause?: FaultCause;
  message?: string;
}

export type Decision =
  | { fault: false; action: RouteAction | null; trace: RouteTrace }
  | { fault: true; trace: RouteTrace };

export interface Router {
  /** True when the webhook has rules or a default action: deliveries are traced and may fault. */
  readonly routes: boolean;
  decide(envelope: Envelope): Decision;
}

const kindOf = (a: RouteAction | null): RouteKind => (a === null ? 'queue' : 'drop' in a ? 'drop' : a.endpoints ? 'fanout' : 'queue');

function traceOf(stage: RouteTrace['stage'], index: number | null, name: string | null, action: RouteAction | null): RouteTrace {
  const t: RouteTrace = { stage, rule_index: index, rule_name: name, action: kindOf(action) };
  if (action && 'queue' in action) {
    t.queue = action.queue;
    if (action.endpoints) t.endpoints = action.endpoints;
    if (action.once) t.once = true;
  }
  return t;
}

/** A monotonic clock in milliseconds (performance.now); tests pass their own. */
export type Stopwatch = () => number;

/** Compiles a webhook's routing (throws invalid_argument naming `rules.N.when` for a bad expression). */
export function compileRouting(config: RoutingConfig, stopwatch: Stopwatch = () => performance.now()): Router {
  const compiled: { name: string; when: CompiledWhen; action: RouteAction }[] = config.rules.map((r, i) => ({
    name: r.name,
    when: compileWhen(`rules.${i}.when`, r.when),
    action: r.action,
  }));
  const fallback = config.defaultAction;
  return {
    routes: compiled.length > 0 || fallback !== null,
    decide(envelope) {
      const start = stopwatch();
      for (const [i, rule] of compiled.entries()) {
        const fault = (cause: FaultCause, message: string): Decision => ({
          fault: true,
          trace: { stage: 'rule', rule_index: i, rule_name: rule.name, action: 'fault', cause, message },
        });
        const before = stopwatch();
        let matched: unknown;
        try {
          matched = rule.when(envelope);
        } catch (err) {
          return fault('error', String((err as Error).message ?? err).split('\n')[0]!.trim());
        }
        const after = stopwatch();
        if (after - before > RULE_BUDGET_MS) return fault('rule_budget', `took ${Math.round(after - before)} ms; a rule may take ${RULE_BUDGET_MS} ms`);
        if (after - start > DELIVERY_BUDGET_MS) return fault('delivery_budget', `the rules took ${Math.round(after - start)} ms; a delivery may take ${DELIVERY_BUDGET_MS} ms`);
        if (typeof matched !== 'boolean') return fault('not_bool', `answered ${typeof matched === 'string' ? JSON.stringify(matched) : typeof matched}, not true or false`);
        if (matched) return { fault: false, action: rule.action, trace: traceOf('rule', i, rule.name, rule.action) };
      }
      return { fault: false, action: fallback, trace: traceOf('default', null, null, fallback) };
    },
  };
}
