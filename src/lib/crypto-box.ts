import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

/**
 * Secrets that must be recovered (webhook signing secrets: the HMAC is recomputed on every
 * delivery) are sealed with AES-256-GCM when a key is configured, else kept as plaintext.
 * Stored forms: `v1:<iv>:<tag>:<ciphertext>` (base64url) or `plain:<secret>`.
 */
export class SecretBox {
  constructor(private readonly key: Buffer | null) {}

  get encrypts(): boolean {
    return this.key !== null;
  }

  seal(secret: string): string {
    if (!this.key) return `plain:${secret}`;
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    const ct = Buffer.concat([cipher.update(secret, 'utf8'), cipher.final()]);
    return ['v1', iv.toString('base64url'), cipher.getAuthTag().toString('base64url'), ct.toString('base64url')].join(':');
  }

  open(stored: string): string {
    if (stored.startsWith('plain:')) return stored.slice('plain:'.length);
    const [version, iv, tag, ct] = stored.split(':');
    if (version !== 'v1' || !iv || !tag || !ct) throw new Error('unrecognized sealed secret');
    if (!this.key) throw new Error('this secret was sealed with SWITCHBOARD_SECRET_ENCRYPTION_KEY, which is not set');
    const decipher = createDecipheriv('aes-256-gcm', this.key, Buffer.from(iv, 'base64url'));
    decipher.setAuthTag(Buffer.from(tag, 'base64url'));
    return Buffer.concat([decipher.update(Buffer.from(ct, 'base64url')), decipher.final()]).toString('utf8');
  }
}

/** A 32-byte key from hex (64 chars) or base64/base64url; null when it is neither. */
export function decodeKey(raw: string): Buffer | null {
  if (/^[0-9a-fA-F]{64}$/.test(raw)) return Buffer.from(raw, 'hex');
  if (/^[A-Za-z0-9+/_-]+={0,2}$/.test(raw)) {
    const b = Buffer.from(raw.replace(/-/g, '+').replace(/_/g, '/'), 'base64');
    if (b.length === 32) return b;
  }
  return null;
}
