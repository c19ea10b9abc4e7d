import { isUtf8 } from 'node:buffer';
import { tooDeepMessage } from '../json-depth.ts';
import type { SourceType } from '../webhook-source.ts';
import { jsonDepthExceeds } from './verify.ts';

type Headers = Record<string, string | string[] | undefined>;

/** GitHub's default content type (and Gitea's other one): the body is `payload=<url-encoded JSON>`. */
export const FORM_CONTENT_TYPE = 'application/x-www-form-urlencoded';

/** The media type of a delivery, lower-cased, without parameters ('' when none is sent). */
export function mediaType(headers: Headers): string {
  const raw = headers['content-type'];
  return ((Array.isArray(raw) ? raw[0] : raw) ?? '').split(';')[0]!.trim().toLowerCase();
}

/** Whether a delivery's JSON travels in the `payload` field of a form body (GitHub and Gitea only). */
export const isFormDelivery = (source: SourceType, contentType: string): boolean => source !== 'generic' && contentType === FORM_CONTENT_TYPE;

/**
 * The `payload` field of a form-encoded body, decoded (`+` is a space, `%XX` a byte of UTF-8), or
 * null when the body carries no such field or carries it more than once.
 */
export function formPayload(body: Buffer): string | null {
  const fields = new URLSearchParams(body.toString('utf8')).getAll('payload');
  return fields.length === 1 ? fields[0]! : null;
}

export type Decoded = { ok: true; payload: unknown } | { ok: false; field: 'body' | 'payload'; message: string };

/**
 * The delivery's JSON, parsed after its signature was checked: from the `payload` field of a form
 * body (GitHub, Gitea), else the body itself, whatever its content type (a generic producer's
 * `curl -d` says `application/x-www-form-urlencoded` for a JSON body). Nothing but JSON is accepted:
 * an empty body, text or a form with no `payload` is refused naming the field.
 */
export function decodeDelivery(source: SourceType, contentType: string, body: Buffer, form: string | null): Decoded {
  if (isFormDelivery(source, contentType)) {
    if (form === null) return { ok: false, field: 'payload', message: `payload: a form-encoded delivery must carry its JSON in one \`payload\` field` };
    return parseJson('payload', form);
  }
  return parseJson('body', body.toString('utf8'));
}

function parseJson(field: 'body' | 'payload', text: string): Decoded {
  if (text.trim() === '') return { ok: false, field, message: `${field}: is empty; a delivery must be JSON` };
  if (jsonDepthExceeds(text)) return { ok: false, field, message: `${field}: ${tooDeepMessage}` };
  try {
    return { ok: true, payload: JSON.parse(text) };
  } catch {
    return { ok: false, field, message: `${field}: is not valid JSON` };
  }
}

/** A digit or a point, then an exponent: a JSON number written like 1e5 (or a string that looks like one). */
const EXPONENT = /[\d.][eE][+-]?\d/;

/**
 * Whether the delivery's JSON is its body's own bytes, to be stored as PostgreSQL reads them (the
 * todo's payload then keeps every digit as sent): not a form's field, valid UTF-8, and no number
 * in exponent form. jsonb writes such a number out in full (1e131071 comes back as 131,072
 * digits), so a few bytes could become a payload of gigabytes; those bodies go through
 * JSON.parse instead, where 1e400 is Infinity and is stored as null, as before.
 */
export function bodyIsStoredPayload(source: SourceType, contentType: string, body: Buffer): boolean {
  // latin1 maps each byte to one character: the multi-byte UTF-8 sequences never match EXPONENT.
  return !isFormDelivery(source, contentType) && isUtf8(body) && !EXPONENT.test(body.toString('latin1'));
}

/** Why a verified delivery is recorded as an event but makes no todo: it announces, it asks for nothing. */
export type NoTodoReason = 'ping' | 'test_delivery';

const ZERO_SHA = /^(?:0{40}|0{64})$/;

/**
 * GitHub's `ping` (sent when a hook is created, and by its "Redeliver" of that delivery) makes no
 * todo. Gitea sends no ping; its "Test Delivery" button sends a `push` of a fake commit whose
 * `before` and `after` are both the all-zero id, which no real push has (a new branch has a zero
 * `before`, a deleted one a zero `after`, never both). Older Gitea releases tested with the
 * branch's last real commit instead: that test is indistinguishable from a push and makes a todo.
 */
export function noTodoReason(source: SourceType, event: string | null, payload: unknown): NoTodoReason | null {
  if (source === 'github' && event === 'ping') return 'ping';
  if (source === 'gitea' && event === 'push' && payload !== null && typeof payload === 'object') {
    const { before, after } = payload as { before?: unknown; after?: unknown };
    if (typeof before === 'string' && before === after && ZERO_SHA.test(before)) return 'test_delivery';
  }
  return null;
}
