import { Environment, type ASTNode } from '@marcbachmann/cel-js';
import { SwitchboardError } from '../errors.ts';

// A rule's `when` is a CEL expression (github.com/google/cel-spec) over the envelope, evaluated by
// @marcbachmann/cel-js (README, "Why CEL for routing rules", with the measurements). CEL has no loops
// and no recursion, no I/O, and its evaluation is synchronous. What is left to bound is done at
// save, so a delivery's cost stays proportional to its payload:
// - structural limits on the parse (nodes, depth, literal sizes);
// - no regular expressions (`matches`): a backtracking pattern over a producer's string can take
//   seconds; `contains`, `startsWith` and `endsWith` do what routing needs;
// - only the boolean comprehensions (`all`, `exists`, `exists_one`), never nested, and a
//   comprehension's body reads only its own variable, `params` and literals: each step then costs
//   one element, and a whole comprehension one pass over its list;
// - no value larger than the rule's own text and params, and never many payload-sized ones at
//   once: `+` and list or map literals hold only literals and params, `split` and `json` are
//   refused, and so is `cel.bind` (bound doublings of a payload's list grew the heap past 700 MiB
//   in 1.5 s in bench/rule-languages.ts; cel-js has no step or memory limit to stop them).
// The time each rule and each delivery took is checked as well (route.ts): over budget is a fault.

/** The envelope's variables and their CEL types. */
const VARIABLES: Record<string, string> = {
  source: 'string',
  event: 'dyn',
  action: 'dyn',
  delivery_id: 'dyn',
  trust_mode: 'string',
  verified: 'bool',
  headers: 'map',
  payload: 'dyn',
  repository: 'dyn',
  sender: 'dyn',
  number: 'dyn',
  labels: 'list',
  assignees: 'list',
  requested_reviewers: 'list',
  subject: 'dyn',
  params: 'map',
};
export const ENVELOPE_VARIABLES: readonly string[] = Object.keys(VARIABLES);

const COMPREHENSIONS = new Set(['all', 'exists', 'exists_one']);
const REFUSED: Record<string, string> = {
  matches: 'regular expressions are not allowed (a backtracking pattern can stall every delivery); use contains, startsWith or endsWith',
  map: 'map() builds lists; routing needs only true or false: use exists, all or exists_one',
  filter: 'filter() builds lists; routing needs only true or false: use exists, all or exists_one',
  transformList: 'transformList() builds lists; use exists, all or exists_one',
  transformMap: 'transformMap() builds maps; use exists, all or exists_one',
  transformMapEntry: 'transformMapEntry() builds maps; use exists, all or exists_one',
  bind: 'cel.bind() is not allowed (bound values can double the payload on every step); write the expression out',
  split: 'split() builds a list as long as the string; use contains, startsWith or endsWith',
  json: 'json() parses a copy of the bytes; the payload is already parsed: read payload.<field>',
};

function environment(): Environment {
  const env = new Environment({
    unlistedVariablesAreDyn: false,
    homogeneousAggregateLiterals: false,
    enableOptionalTypes: true,
    limits: { maxAstNodes: 1000, maxDepth: 48, maxListElements: 256, maxMapEntries: 256, maxCallArguments: 16 },
  });
  for (const [name, type] of Object.entries(VARIABLES)) env.registerVariable(name, type);
  return env;
}

const env = environment();

/** A compiled `when`: true or false for an envelope, or it throws (a fault). */
export type CompiledWhen = (envelope: Record<string, unknown>) => unknown;

const invalidExpression = (field: string, message: string) =>
  new SwitchboardError('invalid_argument', `${field}: ${message}`, { field, reason: 'invalid_expression' });

/** The first line of a cel-js message (the rest draws the expression with a caret). */
const firstLine = (err: unknown) => String((err as Error).message ?? err).split('\n')[0]!.trim();

/**
 * Compiles a rule's `when`: parsed, limited and type-checked to a bool. A problem is
 * invalid_argument naming `field`, with `reason: invalid_expression`.
 */
export function compileWhen(field: string, source: string): CompiledWhen {
  let parsed;
  try {
    parsed = env.parse(source);
  } catch (err) {
    throw invalidExpression(field, `does not parse: ${firstLine(err)}`);
  }
  const problem = structureProblem(parsed.ast);
  if (problem) throw invalidExpression(field, problem);
  const checked = parsed.check();
  if (!checked.valid) throw invalidExpression(field, `does not type-check: ${firstLine(checked.error)}`);
  if (checked.type !== 'bool' && checked.type !== 'dyn') throw invalidExpression(field, `must be true or false, but is a ${checked.type}`);
  return (envelope) => parsed(envelope);
}

/** Why an expression's shape is refused (see the top of this file), or null. */
function structureProblem(root: ASTNode): string | null {
  let problem: string | null = null;
  const visit = (node: ASTNode, inComprehension: { variable: string } | null): void => {
    if (problem) return;
    const { op, args } = node as { op: string; args: unknown };
    if (op === 'call' || op === 'rcall') {
      const name = (args as unknown[])[0] as string;
      if (REFUSED[name]) return void (problem = `${name}: ${REFUSED[name]}`);
      if (op === 'rcall' && COMPREHENSIONS.has(name)) {
        const [, receiver, params] = args as [string, ASTNode, ASTNode[]];
        if (inComprehension) return void (problem = `${name}: a comprehension inside another is not allowed (its cost would multiply)`);
        visit(receiver, null);
        const variable = params[0] && (params[0] as { op: string }).op === 'id' ? ((params[0] as { args: string }).args) : null;
        if (!variable) return void (problem = `${name}: its first argument must be a variable name`);
        for (const p of params.slice(1)) visit(p, { variable });
        return;
      }
    }
    if (op === '+' && !(args as ASTNode[]).every(readsOnlyParamsAndLiterals)) {
      return void (problem = '+ may join only literals and params (a value built from the payload could grow without bound); compare parts instead, e.g. x.contains("@") && x.contains(params.bot)');
    }
    if ((op === 'list' || op === 'map') && !readsOnlyParamsAndLiterals(node)) {
      return void (problem = `a ${op} literal may hold only literals and params (it would keep payload-sized values alive together)`);
    }
    if (op === 'id' && inComprehension) {
      const name = args as string;
      if (name !== inComprehension.variable && name !== 'params') {
        return void (problem = `inside a comprehension only its variable (${inComprehension.variable}), params and literals may be read, not ${name}`);
      }
    }
    forEachChild(args, (child) => visit(child, inComprehension));
  };
  visit(root, null);
  return problem;
}

/** True when a subtree reads no variable but `params`. */
function readsOnlyParamsAndLiterals(node: ASTNode): boolean {
  const { op, args } = node as { op: string; args: unknown };
  if (op === 'id') return args === 'params';
  let only = true;
  forEachChild(args, (child) => (only &&= readsOnlyParamsAndLiterals(child)));
  return only;
}

function forEachChild(args: unknown, fn: (n: ASTNode) => void): void {
  if (Array.isArray(args)) for (const a of args) forEachChild(a, fn);
  else if (args && typeof args === 'object' && 'op' in args) fn(args as ASTNode);
}
