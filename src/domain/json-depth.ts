import { invalidArgument } from './errors.ts';

/**
 * How deep JSON from outside may nest: arrays and objects, 64 levels (`[[1]]` is 2). Deeper values
 * overflow the stack of whatever walks them recursively (zod's JSON schema, JSON.stringify on the
 * way to PostgreSQL), so every JSON value that is stored or processed is measured first, here, by
 * loops that never recurse.
 */
export const JSON_MAX_DEPTH = 64;

/** Whether a parsed JSON value nests at most `max` arrays/objects deep (a scalar is depth 0). */
export function jsonDepthWithin(value: unknown, max = JSON_MAX_DEPTH): boolean {
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length > 0) {
    const [v, depth] = stack.pop()!;
    if (v === null || typeof v !== 'object') continue;
    if (depth + 1 > max) return false;
    for (const child of Array.isArray(v) ? v : Object.values(v)) {
      if (child !== null && typeof child === 'object') stack.push([child, depth + 1]);
    }
  }
  return true;
}

/** Whether JSON text nests at most `max` deep, counted on the text before it is parsed. */
export function jsonTextDepthWithin(text: string, max = JSON_MAX_DEPTH): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 92 /* \ */) i++;
      else if (c === 34 /* " */) inString = false;
    } else if (c === 34) inString = true;
    else if (c === 123 || c === 91) {
      if (++depth > max) return false;
    } else if (c === 125 || c === 93) depth--;
  }
  return true;
}

export const tooDeepMessage = `must nest at most ${JSON_MAX_DEPTH} levels of arrays and objects`;

/** `value` itself, or invalid_argument naming `field` when it nests deeper than JSON_MAX_DEPTH. */
export function requireJsonDepth<T>(field: string, value: T): T {
  if (!jsonDepthWithin(value)) throw invalidArgument(field, tooDeepMessage);
  return value;
}

/**
 * A request body or tool arguments, measured before any schema walks them: each field of an object
 * may nest JSON_MAX_DEPTH levels below it, and the first that nests deeper is named (`payload`,
 * `result`); any other value is measured whole and named `root`.
 */
export function requireFieldsJsonDepth(input: unknown, root: string): void {
  if (input !== null && typeof input === 'object' && !Array.isArray(input)) {
    for (const [key, value] of Object.entries(input)) requireJsonDepth(key, value);
  } else {
    requireJsonDepth(root, input);
  }
}
