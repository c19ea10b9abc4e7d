import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migratedDatabase } from '../../test/support/app.ts';
import { ManualClock } from '../lib/clock.ts';
import { Humans, LOGIN_LINK_TTL_MS, WEB_SESSION_TTL_MS } from './humans.ts';

/** The sign-in rules the board relies on: a good link replaces the browser's session, a dead one leaves it alone. */

let db: Awaited<ReturnType<typeof migratedDatabase>>;
let humans: Humans;
const clock = new ManualClock();

beforeAll(async () => {
  db = await migratedDatabase();
  humans = new Humans({ sql: db.sql, clock });
});
afterAll(async () => db.drop());

describe('sign-in by link', () => {
  it('opens a 12-hour session, ends the previous one, and works once', async () => {
    await humans.add({ handle: 'link-a' });
    const first = await humans.signInByLink((await humans.createLoginLink('link-a')).token);
    const link = await humans.createLoginLink('link-a');
    expect(await humans.loginLinkUsable(link.token)).toBe(true);

    const second = await humans.signInByLink(link.token, first!.sessionToken);
    expect(second!.expiresAt.getTime() - clock.now().getTime()).toBe(WEB_SESSION_TTL_MS);
    expect(await humans.findWebSession(first!.sessionToken)).toBeNull();
    expect((await humans.findWebSession(second!.sessionToken))?.human.handle).toBe('link-a');
    expect(await humans.signInByLink(link.token)).toBeNull();
  });

  it('a dead link leaves the current session alone', async () => {
    await humans.add({ handle: 'link-b' });
    const current = await humans.signInByLink((await humans.createLoginLink('link-b')).token);
    const stale = await humans.createLoginLink('link-b');
    clock.advance(LOGIN_LINK_TTL_MS + 1);
    expect(await humans.loginLinkUsable(stale.token)).toBe(false);
    expect(await humans.signInByLink(stale.token, current!.sessionToken)).toBeNull();
    expect(await humans.findWebSession(current!.sessionToken)).not.toBeNull();
  });
});

describe('sign-in by OpenID Connect', () => {
  const identity = { issuer: 'https://idp.example', subject: 'sub-1', name: 'Ada', email: 'ada@example.com', emailVerified: true, preferredUsername: 'ada' };

  it('creates the human once, then finds it, replacing the previous session', async () => {
    const first = await humans.signInByOidc(identity);
    expect(first).toMatchObject({ created: true, linked: false, human: { handle: 'ada' } });
    const again = await humans.signInByOidc(identity, first.sessionToken);
    expect(again).toMatchObject({ created: false, humanId: first.human.id });
    expect(await humans.findWebSession(first.sessionToken)).toBeNull();
    expect((await humans.findWebSession(again.sessionToken))?.human.id).toBe(first.human.id);
  });
});

describe('personal tokens', () => {
  it('authenticate until revoked', async () => {
    await humans.add({ handle: 'tok-a' });
    const { token, record } = await humans.createToken({ handle: 'tok-a' });
    expect((await humans.authenticateToken(token))?.tokenId).toBe(record.id);
    await humans.revokeToken(record.token_prefix);
    expect(await humans.authenticateToken(token)).toBeNull();
    expect(await humans.authenticateToken('not-a-token')).toBeNull();
  });
});
