import { invalidArgument } from './errors.ts';

/**
 * A place in a newest-first todo listing: the created_at (microseconds since the epoch) and seq of
 * the last todo of a page. On the wire it is an opaque string (`next_cursor`); only this module
 * reads or writes one. Pure.
 */
export interface PageKey {
  createdUs: bigint;
  seq: bigint;
}

const FORM = /^v1:(-?\d{1,19}):(\d{1,19})$/;
const BASE64URL = /^[A-Za-z0-9_-]{1,80}$/;

export const encodeCursor = (k: PageKey): string => Buffer.from(`v1:${k.createdUs}:${k.seq}`, 'utf8').toString('base64url');

/** The page key a `cursor` names; invalid_argument naming `cursor` when it is not one this server wrote. */
export function decodeCursor(raw: string): PageKey {
  const bad = () => invalidArgument('cursor', 'is not a cursor this server gave (pass next_cursor from the previous page unchanged)');
  if (!BASE64URL.test(raw)) throw bad();
  const m = FORM.exec(Buffer.from(raw, 'base64url').toString('utf8'));
  if (!m) throw bad();
  return { createdUs: BigInt(m[1]!), seq: BigInt(m[2]!) };
}
