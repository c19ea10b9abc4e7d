import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

/** The associated data that binds a sealed secret to its row: sealed for one row, it opens for no other. */
export const sealedFor = (table: 'webhooks' | 'notify_hooks', id: string): string => `${table}:${id}`;

/**
 * Secrets that must be recovered (webhook signing secrets: the HMAC is recomputed on every
 * delivery; notify hook secrets: every delivery is signed) are sealed with AES-256-GCM when a key
 * is configured, else kept as plaintext. Stored forms: `v2:<iv>:<tag>:<ciphertext>` (base64url,
 * the row named as associated data, see `for`), `plain:<secret>` (no key), and `v1:` (sealed
 * before the row was bound; read only by `openLegacy`, which the startup reseal uses).
 *
 * With a key set, `plain:` and `v1:` are refused by `open`: a value written straight into the
 * database, or copied from another row, does not become a secret the server signs or verifies with.
 */
export class SecretBox {
  constructor(
    private readonly key: Buffer | null,
    private readonly boundTo: string | null = null,
  ) {}

  get encrypts(): boolean {
    return this.key !== null;
  }

  /** This box for one row (`sealedFor(table, id)`): what it seals opens only for the same row. */
  for(boundTo: string): SecretBox {
    return new SecretBox(this.key, boundTo);
  }

  seal(secret: string): string {
    if (!this.key) return `plain:${secret}`;
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    cipher.setAAD(Buffer.from(this.#ad()));
    const ct = Buffer.concat([cipher.update(secret, 'utf8'), cipher.final()]);
    return ['v2', iv.toString('base64url'), cipher.getAuthTag().toString('base64url'), ct.toString('base64url')].join(':');
  }

  open(stored: string): string {
    if (stored.startsWith('plain:')) {
      if (this.key) throw new Error('a plaintext secret is refused while SWITCHBOARD_SECRET_ENCRYPTION_KEY is set (restart an instance to reseal it)');
      return stored.slice('plain:'.length);
    }
    const [version] = stored.split(':');
    if (version === 'v1') {
      if (this.key) throw new Error('a secret sealed before row binding is refused (restart an instance to reseal it)');
      throw new Error('this secret was sealed with SWITCHBOARD_SECRET_ENCRYPTION_KEY, which is not set');
    }
    return this.#decrypt(stored, 'v2', this.#ad());
  }

  /**
   * A value stored in a form older than this box writes (`plain:`, `v1:`), opened so it can be
   * resealed; null when it is already current (`v2:`) or there is no key to seal under.
   */
  openLegacy(stored: string): string | null {
    if (!this.key) return null;
    if (stored.startsWith('plain:')) return stored.slice('plain:'.length);
    return stored.startsWith('v1:') ? this.#decrypt(stored, 'v1', null) : null;
  }

  #ad(): string {
    if (this.boundTo === null) throw new Error('a secret box must be bound to its row (box.for(sealedFor(table, id)))');
    return this.boundTo;
  }

  #decrypt(stored: string, expected: 'v1' | 'v2', ad: string | null): string {
    const [version, iv, tag, ct] = stored.split(':');
    if (version !== expected || !iv || !tag || !ct) throw new Error('unrecognized sealed secret');
    if (!this.key) throw new Error('this secret was sealed with SWITCHBOARD_SECRET_ENCRYPTION_KEY, which is not set');
    const decipher = createDecipheriv('aes-256-gcm', this.key, Buffer.from(iv, 'base64url'));
    if (ad !== null) decipher.setAAD(Buffer.from(ad));
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
