import type { Sql } from '../db/connect.ts';
import { operatorActor, type AuditActor } from '../domain/actor.ts';
import type { Clock } from '../lib/clock.ts';
import { audit } from '../lib/audit.ts';
import type { Logger } from '../lib/log.ts';
import {
  addHuman,
  authenticatePersonalToken,
  createToken,
  humanForOidcIdentity,
  listHumans,
  listTokens,
  personalTokenRevoked,
  revokeToken,
  type Human,
  type HumanToken,
  type OidcIdentityInput,
} from '../store/humans.ts';
import { consumeLoginLink, createLoginLink, deleteWebSession, findWebSession, loginLinkUsable, openWebSession } from '../store/web-sessions.ts';

export type { Human, HumanToken, OidcIdentityInput };
export { LOGIN_LINK_TTL_MS, WEB_SESSION_TTL_MS } from '../store/web-sessions.ts';

export interface HumansBase {
  sql: Sql;
  clock: Clock;
  /** Where audit lines go: the server's log (board sign-in and sign-out), an admin command's stderr (tokens). */
  log?: Logger;
  /** Who acts, for the audit lines of token changes made outside a request (`admin:<os user>`). */
  by?: string;
}

/** A board session just opened: the cookie value and when it ends. */
export interface OpenedSession {
  sessionToken: string;
  humanId: string;
  expiresAt: Date;
}

/**
 * The people who own endpoints and how they prove it: personal access tokens for /api/v1 and the
 * CLI, one-time sign-in links and OpenID Connect for the board, and the board's web sessions.
 * Used by the API guard, the board's sign-in routes and `switchboard admin`.
 */
export class Humans {
  constructor(private readonly base: HumansBase) {}

  /** Who the token lines name: the admin command as it names itself (`unknown` when it did not). */
  #admin(): AuditActor {
    return { kind: 'admin', label: this.base.by ?? 'unknown' };
  }

  /** The human behind a personal access token (sbp_...), or null for anything else. */
  authenticateToken(presented: string): Promise<{ human: Human; tokenId: string } | null> {
    return authenticatePersonalToken(this.base.sql, presented, this.base.clock.now());
  }

  /** Whether a token that did not authenticate is one that was revoked (the 401 says so to its holder). */
  tokenWasRevoked(presented: string): Promise<boolean> {
    return personalTokenRevoked(this.base.sql, presented);
  }

  add(input: { handle: string; displayName?: string; email?: string }): Promise<Human> {
    return addHuman(this.base.sql, input);
  }

  list(): Promise<Human[]> {
    return listHumans(this.base.sql);
  }

  async createToken(input: { handle: string; name?: string }): Promise<{ token: string; record: HumanToken }> {
    const created = await createToken(this.base.sql, input);
    const r = created.record;
    if (this.base.log) audit(this.base.log, 'token.create', this.#admin(), { human: input.handle, token_id: r.id, prefix: r.token_prefix, name: r.name });
    return created;
  }

  listTokens(handle: string): Promise<HumanToken[]> {
    return listTokens(this.base.sql, handle);
  }

  /** By token id or display prefix. */
  async revokeToken(ref: string): Promise<HumanToken> {
    const revoked = await revokeToken(this.base.sql, ref, this.base.clock.now());
    if (this.base.log) audit(this.base.log, 'token.revoke', this.#admin(), { human_id: revoked.human_id, token_id: revoked.id, prefix: revoked.token_prefix });
    return revoked;
  }

  /** A one-time board sign-in link token for a human, valid LOGIN_LINK_TTL_MS. */
  createLoginLink(handle: string): Promise<{ token: string; human: Human; expiresAt: Date }> {
    return createLoginLink(this.base.sql, handle, this.base.clock.now());
  }

  /** Whether a sign-in link could still be used (spends nothing). */
  loginLinkUsable(token: string): Promise<boolean> {
    return loginLinkUsable(this.base.sql, token, this.base.clock.now());
  }

  /** The live session behind a cookie value, or null. */
  findWebSession(sessionToken: string): Promise<{ human: Human; expiresAt: Date } | null> {
    return findWebSession(this.base.sql, sessionToken, this.base.clock.now());
  }

  deleteWebSession(sessionToken: string): Promise<boolean> {
    return deleteWebSession(this.base.sql, sessionToken);
  }

  /**
   * Spends a sign-in link and opens a session for its human; null when the link is unknown, used
   * or expired. A session the browser already had is ended only once the link proved good.
   */
  async signInByLink(linkToken: string, previousSessionToken?: string): Promise<OpenedSession | null> {
    const opened = await consumeLoginLink(this.base.sql, linkToken, this.base.clock.now());
    if (!opened) return null;
    if (previousSessionToken) await this.deleteWebSession(previousSessionToken);
    if (this.base.log) audit(this.base.log, 'board.sign_in', operatorActor(opened.humanId), { method: 'link' });
    return opened;
  }

  /** Ends a board session the human asked to end. */
  async signOut(humanId: string, sessionToken: string): Promise<void> {
    await this.deleteWebSession(sessionToken);
    if (this.base.log) audit(this.base.log, 'board.sign_out', operatorActor(humanId), {});
  }

  /** The human behind an identity an OpenID Connect provider vouched for (bound, linked by email, or created). */
  forOidcIdentity(identity: OidcIdentityInput): Promise<{ human: Human; created: boolean; linked: boolean }> {
    return humanForOidcIdentity(this.base.sql, identity);
  }

  /** Signs in the human behind a verified OIDC identity, replacing the browser's previous session. */
  async signInByOidc(
    identity: OidcIdentityInput,
    previousSessionToken?: string,
  ): Promise<OpenedSession & { human: Human; created: boolean; linked: boolean }> {
    const { human, created, linked } = await this.forOidcIdentity(identity);
    if (previousSessionToken) await this.deleteWebSession(previousSessionToken);
    const opened = await openWebSession(this.base.sql, human.id, this.base.clock.now());
    if (this.base.log) audit(this.base.log, 'board.sign_in', operatorActor(human.id), { method: 'oidc', created, linked });
    return { ...opened, humanId: human.id, human, created, linked };
  }
}
