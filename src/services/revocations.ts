import type { Logger } from '../lib/log.ts';
import type { Sql } from '../db/connect.ts';
import type { SessionRegistry } from '../sessions/registry.ts';
import { inactiveEndpointIdsUnscoped } from '../store/endpoints.ts';
import { revokedGrantIdsUnscoped } from '../store/oauth/index.ts';
import type { EndpointCredentials } from './endpoint-credentials.ts';
import type { WakeupHandlers } from './wakeups.ts';

/**
 * What a revocation means on one instance: its cached credential is forgotten and its sessions
 * closed at once. The instance that revoked calls `forget`; every other instance hears
 * endpoint_revoked, and after a reconnect checks every endpoint it still holds sessions for.
 */
export class Revocations {
  constructor(
    private readonly base: { sql: Sql; log: Logger },
    private readonly sessions: SessionRegistry,
    private readonly credentials: EndpointCredentials,
  ) {}

  /** Drops a revoked endpoint here; how many sessions it closed. */
  forget(endpointId: string): number {
    this.credentials.invalidateEndpoint(endpointId);
    return this.sessions.closeEndpoint(endpointId, 'endpoint revoked');
  }

  /** Ends the sessions here whose last request carried a token of this (revoked) OAuth grant. */
  #endGrant(grantId: string): void {
    const victims = this.sessions.all().filter((s) => s.oauthGrantId === grantId);
    for (const s of victims) this.sessions.close(s, 'oauth grant revoked');
    if (victims.length > 0) this.base.log.info({ grant_id: grantId, sessions: victims.length }, 'closed sessions of a revoked oauth grant');
  }

  wakeups(): WakeupHandlers {
    const { sql, log } = this.base;
    return {
      oauth_grant_revoked: {
        onNotify: ({ grantId }) => this.#endGrant(grantId),
        // A stream makes no request that would be refused: after a reconnect, check every grant held here.
        onListen: async () => {
          const held = [...new Set(this.sessions.all().flatMap((s) => (s.oauthGrantId ? [s.oauthGrantId] : [])))];
          for (const id of await revokedGrantIdsUnscoped(sql, held)) this.#endGrant(id);
        },
      },
      endpoint_revoked: {
        onNotify: ({ endpointId }) => {
          const closed = this.forget(endpointId);
          if (closed) log.info({ endpoint_id: endpointId, sessions: closed }, 'closed sessions of a revoked endpoint');
        },
        // After a reconnect, revocations may have been missed: check every endpoint we hold sessions for.
        onListen: async () => {
          const held = [...new Set(this.sessions.all().map((s) => s.endpoint.id))];
          for (const id of await inactiveEndpointIdsUnscoped(sql, held)) this.forget(id);
        },
      },
    };
  }
}
