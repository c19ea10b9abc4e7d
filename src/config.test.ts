import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from './config.ts';

const fails = (env: NodeJS.ProcessEnv) => {
  try {
    loadConfig(env);
  } catch (e) {
    if (e instanceof ConfigError) return e;
    throw e;
  }
  throw new Error('expected loadConfig to fail');
};

describe('loadConfig', () => {
  it('resolves a relative SWITCHBOARD_DATA_DIR against the working directory and keeps what was given', () => {
    const c = loadConfig({ SWITCHBOARD_DATA_DIR: 'relative/dir' });
    expect(c.dataDir).toBe(join(process.cwd(), 'relative/dir'));
    expect(c.dataDirRelative).toBe('relative/dir');
    expect(loadConfig({ SWITCHBOARD_DATA_DIR: '/srv/sb' }).dataDirRelative).toBeUndefined();
  });

  it('defaults to 127.0.0.1:8080, embedded database, info logs', () => {
    const c = loadConfig({ SWITCHBOARD_DATA_DIR: '/srv/sb' });
    expect(c).toMatchObject({
      databaseUrl: undefined,
      listenHost: '127.0.0.1',
      listenPort: 8080,
      baseUrl: 'http://127.0.0.1:8080',
      baseUrlExplicit: false,
      dataDir: '/srv/sb',
      logLevel: 'info',
      doorbellAckWindowMs: 15 * 60_000,
      metricsToken: undefined,
      secretEncryptionKey: null,
      pushAllowHttp: false,
      notifyHookMax: 5,
      notifyHookPorts: [80, 443],
    });
  });

  it('prefers SWITCHBOARD_DATABASE_URL over DATABASE_URL, and accepts DATABASE_URL alone', () => {
    expect(loadConfig({ SWITCHBOARD_DATABASE_URL: 'postgres://a@h/x', DATABASE_URL: 'postgres://b@h/y' }).databaseUrl).toBe('postgres://a@h/x');
    expect(loadConfig({ DATABASE_URL: 'postgresql://b@h/y' }).databaseUrl).toBe('postgresql://b@h/y');
  });

  it('takes a direct listen URL beside a pooler URL; unset, there is none', () => {
    const env = { SWITCHBOARD_DATABASE_URL: 'postgres://sb:pw@pgbouncer:6432/sb', SWITCHBOARD_LISTEN_DATABASE_URL: 'postgres://sb:pw@db:5432/sb' };
    expect(loadConfig(env)).toMatchObject({ databaseUrl: 'postgres://sb:pw@pgbouncer:6432/sb', listenDatabaseUrl: 'postgres://sb:pw@db:5432/sb' });
    expect(loadConfig({ DATABASE_URL: 'postgres://a@h/x', SWITCHBOARD_LISTEN_DATABASE_URL: 'postgres://a@d/x' }).listenDatabaseUrl).toBe('postgres://a@d/x');
    expect(loadConfig({ SWITCHBOARD_DATABASE_URL: 'postgres://a@h/x', SWITCHBOARD_LISTEN_DATABASE_URL: ' ' }).listenDatabaseUrl).toBeUndefined();
  });

  it('never echoes a refused database URL (it may carry a password)', () => {
    const e = fails({ SWITCHBOARD_DATABASE_URL: 'postgres://a@h/x', SWITCHBOARD_LISTEN_DATABASE_URL: 'mysql://sb:hunter2@db/sb' });
    expect(e.message).not.toContain('hunter2');
  });

  it('takes a base URL without its trailing slash', () => {
    expect(loadConfig({ SWITCHBOARD_BASE_URL: 'https://sb.example.com/' })).toMatchObject({ baseUrl: 'https://sb.example.com', baseUrlExplicit: true });
  });

  it('takes an ack window from 1m to 6h and a metrics token of at least 32 bytes', () => {
    expect(loadConfig({ SWITCHBOARD_DOORBELL_ACK_WINDOW: '1h30m' }).doorbellAckWindowMs).toBe(90 * 60_000);
    expect(loadConfig({ SWITCHBOARD_DOORBELL_ACK_WINDOW: '1m' }).doorbellAckWindowMs).toBe(60_000);
    expect(loadConfig({ SWITCHBOARD_METRICS_TOKEN: 'x'.repeat(32) }).metricsToken).toBe('x'.repeat(32));
  });

  it('ends a session with no stream and no call after 5 minutes by default; SWITCHBOARD_SESSION_IDLE takes 1m to 24h', () => {
    expect(loadConfig({}).sessionIdleMs).toBe(5 * 60_000);
    expect(loadConfig({ SWITCHBOARD_SESSION_IDLE: '90s' }).sessionIdleMs).toBe(90_000);
    expect(loadConfig({ SWITCHBOARD_SESSION_IDLE: '24h' }).sessionIdleMs).toBe(24 * 3_600_000);
    expect(fails({ SWITCHBOARD_SESSION_IDLE: '30s' }).message).toContain('between 1m and 24h');
    expect(fails({ SWITCHBOARD_SESSION_IDLE: 'idle' }).variable).toBe('SWITCHBOARD_SESSION_IDLE');
  });

  it('keeps finished rows 30 days by default; SWITCHBOARD_RETENTION takes a duration of at least 1h', () => {
    expect(loadConfig({}).retentionMs).toBe(30 * 24 * 3_600_000);
    expect(loadConfig({ SWITCHBOARD_RETENTION: '168h' }).retentionMs).toBe(7 * 24 * 3_600_000);
    for (const bad of ['30d', '59m', 'forever']) expect(fails({ SWITCHBOARD_RETENTION: bad }).variable).toBe('SWITCHBOARD_RETENTION');
  });

  it('takes notify hook ports as a list or "any"', () => {
    expect(loadConfig({ SWITCHBOARD_NOTIFY_HOOK_PORTS: '443, 8443' }).notifyHookPorts).toEqual([443, 8443]);
    expect(loadConfig({ SWITCHBOARD_NOTIFY_HOOK_PORTS: 'any' }).notifyHookPorts).toBe('any');
  });

  it('uses a per-user data dir by default', () => {
    const c = loadConfig({ XDG_DATA_HOME: '/home/u/.data' });
    expect(c.dataDir).toBe(process.getuid?.() === 0 ? '/var/lib/switchboard' : '/home/u/.data/switchboard');
  });

  it.each([
    ['SWITCHBOARD_DATABASE_URL', { SWITCHBOARD_DATABASE_URL: 'mysql://x@y/z' }],
    ['DATABASE_URL', { DATABASE_URL: 'not a url' }],
    ['SWITCHBOARD_LISTEN_DATABASE_URL', { SWITCHBOARD_DATABASE_URL: 'postgres://a@h/x', SWITCHBOARD_LISTEN_DATABASE_URL: 'http://db/x' }],
    ['SWITCHBOARD_LISTEN_DATABASE_URL', { SWITCHBOARD_DATABASE_URL: 'postgres://a@h/x', SWITCHBOARD_LISTEN_DATABASE_URL: 'db:5432' }],
    ['SWITCHBOARD_LISTEN_DATABASE_URL', { SWITCHBOARD_LISTEN_DATABASE_URL: 'postgres://a@d/x' }],
    ['SWITCHBOARD_LISTEN', { SWITCHBOARD_LISTEN: '8080' }],
    ['SWITCHBOARD_LISTEN', { SWITCHBOARD_LISTEN: '127.0.0.1:99999' }],
    ['SWITCHBOARD_BASE_URL', { SWITCHBOARD_BASE_URL: 'ftp://x' }],
    ['SWITCHBOARD_BASE_URL', { SWITCHBOARD_BASE_URL: 'https://user:pw@x' }],
    ['SWITCHBOARD_LOG_LEVEL', { SWITCHBOARD_LOG_LEVEL: 'loud' }],
    ['SWITCHBOARD_LOG_FORMAT', { SWITCHBOARD_LOG_FORMAT: 'xml' }],
    ['SWITCHBOARD_INGEST_RATE', { SWITCHBOARD_INGEST_RATE: '0' }],
    ['SWITCHBOARD_INGEST_RATE', { SWITCHBOARD_INGEST_RATE: '5/s' }],
    ['SWITCHBOARD_DOORBELL_ACK_WINDOW', { SWITCHBOARD_DOORBELL_ACK_WINDOW: '30s' }],
    ['SWITCHBOARD_DOORBELL_ACK_WINDOW', { SWITCHBOARD_DOORBELL_ACK_WINDOW: '7h' }],
    ['SWITCHBOARD_DOORBELL_ACK_WINDOW', { SWITCHBOARD_DOORBELL_ACK_WINDOW: 'soon' }],
    ['SWITCHBOARD_SESSION_IDLE', { SWITCHBOARD_SESSION_IDLE: '25h' }],
    ['SWITCHBOARD_METRICS_TOKEN', { SWITCHBOARD_METRICS_TOKEN: 'short' }],
    ['SWITCHBOARD_SECRET_ENCRYPTION_KEY', { SWITCHBOARD_SECRET_ENCRYPTION_KEY: 'abcd' }],
    ['SWITCHBOARD_NOTIFY_HOOK_ALLOW_CIDRS', { SWITCHBOARD_NOTIFY_HOOK_ALLOW_CIDRS: '10.0.0.0/33' }],
    ['SWITCHBOARD_NOTIFY_HOOK_ALLOW_CIDRS', { SWITCHBOARD_NOTIFY_HOOK_ALLOW_CIDRS: 'localhost' }],
    ['SWITCHBOARD_NOTIFY_HOOK_MAX', { SWITCHBOARD_NOTIFY_HOOK_MAX: 'many' }],
    ['SWITCHBOARD_NOTIFY_HOOK_PORTS', { SWITCHBOARD_NOTIFY_HOOK_PORTS: '443,https' }],
    ['SWITCHBOARD_NOTIFY_HOOK_PORTS', { SWITCHBOARD_NOTIFY_HOOK_PORTS: '70000' }],
    ['SWITCHBOARD_PUSH_ALLOW_HTTP', { SWITCHBOARD_PUSH_ALLOW_HTTP: 'yes please' }],
    ['SWITCHBOARD_SECRET_ENCRYPTION_KEY', { SWITCHBOARD_SECRET_ENCRYPTION_KEY: 'z'.repeat(64) }],
    ['SWITCHBOARD_METRICS_TOKEN', { SWITCHBOARD_METRICS_TOKEN: 'a b'.repeat(20) }],
    ['SWITCHBOARD_TRUSTED_PROXIES', { SWITCHBOARD_TRUSTED_PROXIES: '10.0.0.1,proxy.internal' }],
    ['SWITCHBOARD_TRUSTED_PROXIES', { SWITCHBOARD_TRUSTED_PROXIES: '10.0.0.0/33' }],
    ['SWITCHBOARD_TRUSTED_PROXIES', { SWITCHBOARD_TRUSTED_PROXIES: 'fd00::/129' }],
    ['SWITCHBOARD_TRUSTED_PROXIES', { SWITCHBOARD_TRUSTED_PROXIES: 'fe80::1%eth0' }],
  ])('refuses a bad %s and names it', (variable, env) => {
    const e = fails(env);
    expect(e.variable).toBe(variable);
    expect(e.message).toContain(variable);
  });
});

describe('SWITCHBOARD_TRUSTED_PROXIES', () => {
  it('trusts no proxy by default', () => {
    expect(loadConfig({}).trustedProxies).toEqual([]);
  });

  it('takes IPv4 and IPv6 addresses and CIDRs, comma-separated', () => {
    const env = { SWITCHBOARD_TRUSTED_PROXIES: ' 10.0.0.5, 10.1.0.0/16 ,fd00::/8,::1' };
    expect(loadConfig(env).trustedProxies).toEqual(['10.0.0.5', '10.1.0.0/16', 'fd00::/8', '::1']);
  });

  it('names the bad entry', () => {
    expect(fails({ SWITCHBOARD_TRUSTED_PROXIES: '10.0.0.1,proxy.internal' }).message).toContain('"proxy.internal"');
  });
});
