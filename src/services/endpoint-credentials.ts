import type { ServiceBase } from './base.ts';
import type { Clock } from '../lib/clock.ts';
import type { Sql } from '../db/connect.ts';
import { ENDPOINT_CREDENTIAL_PREFIX, hashSecret } from '../lib/secrets.ts';
import { authenticateEndpointCredentialUnscoped, type Endpoint } from '../store/endpoints.ts';
import { ACCESS_TOKEN_PREFIX } from '../store/oauth/index.ts';
import type { OAuthServer } from './oauth.ts';

/** How long a resolved credential is trusted without asking the database again. */
export const CREDENTIAL_CACHE_MS = 10_000;

/**
 * Resolves endpoint credentials for the MCP transport, remembering a success briefly so an agent's
 * every request does not cost a database round trip. A revocation drops the entry at once on this
 * instance (invalidateEndpoint, called by the revoke path and by the endpoint_revoked wakeup on
 * every instance); the short lifetime bounds how long a missed wakeup could matter. Failures are
 * never cached. Keys are SHA-256 hashes, never the credential itself.
 */
export class EndpointCredentials {
  readonly #cache = new Map<string, { endpoint: Endpoint; until: number }>();

  private readonly sql: Sql;
  private readonly clock: Clock;

  constructor(
    base: Pick<ServiceBase, 'sql' | 'clock'>,
    /** OAuth access tokens (sba_...): resolved on every request, never cached, so a revoked grant closes at once. */
    private readonly oauth: Pick<OAuthServer, 'endpointFor'> | null = null,
    private readonly ttlMs = CREDENTIAL_CACHE_MS,
  ) {
    ({ sql: this.sql, clock: this.clock } = base);
  }

  /** The endpoint whose credential (or OAuth access token) this is, only if it is active and `slug` is its URL. */
  async resolve(presented: string, slug: string): Promise<(Endpoint & { oauth_grant_id?: string; oauth_expires_at?: Date }) | null> {
    if (this.oauth && presented.startsWith(ACCESS_TOKEN_PREFIX)) return this.oauth.endpointFor(presented, slug);
    if (!presented.startsWith(ENDPOINT_CREDENTIAL_PREFIX)) return null;
    const key = hashSecret(presented);
    const now = this.clock.now();
    const hit = this.#cache.get(key);
    if (hit && hit.until > now.getTime()) return hit.endpoint.slug === slug ? hit.endpoint : null;
    const endpoint = await authenticateEndpointCredentialUnscoped(this.sql, presented, now, slug);
    if (endpoint) this.#cache.set(key, { endpoint, until: now.getTime() + this.ttlMs });
    // A miss is not remembered: the credential may be valid at its own URL.
    if (this.#cache.size > 10_000) this.#prune(now.getTime());
    return endpoint;
  }

  invalidateEndpoint(endpointId: string): void {
    for (const [k, v] of this.#cache) if (v.endpoint.id === endpointId) this.#cache.delete(k);
  }

  #prune(nowMs: number): void {
    for (const [k, v] of this.#cache) if (v.until <= nowMs) this.#cache.delete(k);
  }
}
