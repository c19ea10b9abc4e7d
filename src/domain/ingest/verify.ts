import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { JSON_MAX_DEPTH, jsonTextDepthWithin } from '../json-depth.ts';
import type { SourceType } from '../webhook-source.ts';

export type VerifyFailure = 'missing_signature' | 'malformed_signature' | 'bad_signature';
export type Verification = { ok: true; signed: Buffer } | { ok: false; reason: VerifyFailure };

type Headers = Record<string, string | string[] | undefined>;
const header = (h: Headers, name: string): string | undefined => {
  const v = h[name];
  return Array.isArray(v) ? v[0] : v;
};

/**
 * Checks a signed delivery's HMAC-SHA256, in constant time, before anything is parsed. GitHub:
 * `X-Hub-Signature-256: sha256=<hex>` (the prefix is required). Gitea: `X-Gitea-Signature: <hex>`,
 * or the GitHub header. The signature is checked over the raw body first; `alternatives` are other
 * bytes it may cover instead (Gitea signs a form delivery's JSON, not the form around it). The
 * answer names the bytes it verified: a body is one delivery however it is wrapped.
 */
export function verifySignature(source: SourceType, headers: Headers, body: Buffer, secret: string, alternatives: readonly Buffer[] = []): Verification {
  let hex: string | undefined;
  const githubStyle = header(headers, 'x-hub-signature-256');
  if (source === 'gitea' && header(headers, 'x-gitea-signature') !== undefined) {
    hex = header(headers, 'x-gitea-signature')!.trim();
  } else if (githubStyle !== undefined) {
    const m = /^sha256=(.*)$/.exec(githubStyle.trim());
    if (!m) return { ok: false, reason: 'malformed_signature' };
    hex = m[1];
  } else {
    return { ok: false, reason: 'missing_signature' };
  }
  if (!hex || !/^[0-9a-fA-F]{64}$/.test(hex)) return { ok: false, reason: 'malformed_signature' };
  const given = Buffer.from(hex, 'hex');
  for (const signed of [body, ...alternatives]) {
    if (timingSafeEqual(createHmac('sha256', secret).update(signed).digest(), given)) return { ok: true, signed };
  }
  return { ok: false, reason: 'bad_signature' };
}

/** The header values never stored or logged. */
const REDACTED = new Set(['x-hub-signature', 'x-hub-signature-256', 'x-gitea-signature', 'x-gogs-signature', 'authorization', 'cookie', 'x-api-key', 'proxy-authorization']);

/** Lower-cased names; signatures, credentials and cookies replaced; hop-by-hop noise dropped. */
export function sanitizeHeaders(headers: Headers): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue;
    const key = name.toLowerCase();
    if (key === 'connection' || key === 'content-length' || key === 'transfer-encoding') continue;
    out[key] = REDACTED.has(key) ? '«redacted»' : (Array.isArray(value) ? value.join(', ') : value).slice(0, 1024);
  }
  return out;
}

/** The delivery's own id when the producer sends one (at most 256 bytes), else the body's SHA-256. */
export function deliveryId(source: SourceType, headers: Headers, body: Buffer): string {
  const names =
    source === 'github' ? ['x-github-delivery'] : source === 'gitea' ? ['x-gitea-delivery', 'x-github-delivery'] : ['x-delivery-id', 'webhook-id'];
  for (const n of names) {
    const v = header(headers, n)?.trim();
    if (v && Buffer.byteLength(v) <= 256) return v;
  }
  return `sha256:${createHash('sha256').update(body).digest('hex')}`;
}

/** The body's SHA-256: a signed body is one delivery however its unsigned headers are relabelled. */
export const bodyDigest = (body: Buffer): Buffer => createHash('sha256').update(body).digest();

/** The header that names a delivery's event, per source (Gitea also sends GitHub's). */
export const EVENT_HEADERS: Record<SourceType, string> = { github: 'X-GitHub-Event', gitea: 'X-Gitea-Event', generic: 'X-Event-Type' };

export function eventType(source: SourceType, headers: Headers): string | null {
  if (source === 'github') return header(headers, 'x-github-event') ?? null;
  if (source === 'gitea') return header(headers, 'x-gitea-event') ?? header(headers, 'x-github-event') ?? null;
  return header(headers, 'x-event-type') ?? null;
}

/** JSON nested deeper than this is refused: the one limit of domain/json-depth.ts, measured on the text. */
export const MAX_JSON_DEPTH = JSON_MAX_DEPTH;

export const jsonDepthExceeds = (text: string, max = MAX_JSON_DEPTH): boolean => !jsonTextDepthWithin(text, max);
