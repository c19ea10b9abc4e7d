import { z } from 'zod';
import { LIST_MAX_LIMIT } from './lifecycle.ts';
import { invalidArgument } from './errors.ts';
import { requireFieldsJsonDepth } from './json-depth.ts';

/** Parses input with a zod schema; the first problem becomes invalid_argument naming its field. */
export function parseInput<S extends z.ZodType>(schema: S, input: unknown, root = 'body'): z.infer<S> {
  // Before the schema: zod walks JSON values recursively, and a deep one overflows its stack.
  requireFieldsJsonDepth(input, root);
  const r = schema.safeParse(input);
  if (r.success) return r.data;
  const issue = r.error.issues[0]!;
  let field = issue.path.length ? issue.path.map(String).join('.') : root;
  let message = issue.message;
  if (issue.code === 'unrecognized_keys') {
    const keys = (issue as { keys: string[] }).keys;
    field = [...issue.path.map(String), keys[0]].join('.');
    const noun = root === 'arguments' ? 'argument' : 'field';
    message = `unknown ${noun}${keys.length > 1 ? 's' : ''} ${keys.map((k) => JSON.stringify(k)).join(', ')}`;
  }
  throw invalidArgument(field, message);
}

/** `?limit=`: a whole number from 1 to 200 (the default, 50, is applied by the route). */
export const limitParam = z
  .string()
  .regex(/^\d+$/, 'must be a whole number')
  .transform(Number)
  .pipe(z.number().int().min(1, `must be between 1 and ${LIST_MAX_LIMIT}`).max(LIST_MAX_LIMIT, `must be between 1 and ${LIST_MAX_LIMIT}`))
  .optional();
