import { createHmac, randomBytes } from 'node:crypto';

/** Standard Webhooks: `whsec_` + base64 of 32 random bytes; the HMAC key is those bytes. */
export const mintHookSecret = (): string => `whsec_${randomBytes(32).toString('base64')}`;

function keyOf(secret: string): Buffer {
  return Buffer.from(secret.startsWith('whsec_') ? secret.slice('whsec_'.length) : secret, 'base64');
}

/** `v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">`, one per secret, space-separated. */
export function signatureHeader(secrets: readonly string[], msgId: string, timestamp: number, body: string): string {
  return secrets
    .map((s) => `v1,${createHmac('sha256', keyOf(s)).update(`${msgId}.${timestamp}.${body}`).digest('base64')}`)
    .join(' ');
}
