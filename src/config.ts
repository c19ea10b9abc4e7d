import { homedir } from 'node:os';
import { isIP, type BlockList } from 'node:net';
import { decodeKey } from './lib/crypto-box.ts';
import { parseAllowList, parsePorts } from './lib/ssrf.ts';
import { parseDuration } from './domain/duration.ts';
import { isAbsolute, join, resolve } from 'node:path';

/** Board sign-in through an OpenID Connect provider (SWITCHBOARD_OIDC_*). */
export interface OidcSettings {
  issuer: string;
  clientId: string;
  /** Absent: a public client, authenticated by PKCE alone. */
  clientSecret: string | undefined;
  /** Absent: `<base URL>/auth/callback`. */
  redirectUrl: string | undefined;
}

const isLoopbackHost = (host: string) => host === 'localhost' || host === '[::1]' || /^127\.\d+\.\d+\.\d+$/.test(host);

/** Plain http is accepted only for an issuer on this host (a local provider or a test). */
export function issuerAllowsHttp(issuer: string): boolean {
  const url = new URL(issuer);
  return url.protocol === 'http:' && isLoopbackHost(url.hostname);
}

import type { LogFormat, LogLevel } from './lib/log.ts';

export type { LogFormat, LogLevel };

export interface Config {
  /** PostgreSQL URL; undefined means "run the embedded PostgreSQL in dataDir". */
  databaseUrl: string | undefined;
  /**
   * A direct PostgreSQL URL for LISTEN and migrations. Set: databaseUrl is a transaction-mode
   * pooler (PgBouncer), so the main pool sends no named prepared statements.
   */
  listenDatabaseUrl: string | undefined;
  listenHost: string;
  listenPort: number;
  /** Public base URL with no trailing slash; used for every URL the server prints. */
  baseUrl: string;
  /** False when baseUrl was derived from the listen address (a test on port 0 rewrites it). */
  baseUrlExplicit: boolean;
  /** Absolute: a relative SWITCHBOARD_DATA_DIR is resolved against the working directory. */
  dataDir: string;
  /** The relative SWITCHBOARD_DATA_DIR as given, when it was resolved (serve and admin say so). */
  dataDirRelative: string | undefined;
  logLevel: LogLevel;
  /** SWITCHBOARD_LOG_FORMAT: json, pretty, or auto (pretty on a terminal, the default). */
  logFormat: LogFormat;
  /** How long a ring may wait for an acknowledgement before it is unheard. */
  doorbellAckWindowMs: number;
  /** An MCP session with no open stream and no call for this long ends (SWITCHBOARD_SESSION_IDLE). */
  sessionIdleMs: number;
  /** The scrape credential for GET /metrics; undefined keeps /metrics closed. */
  metricsToken: string | undefined;
  /** AES-256-GCM key for webhook signing secrets at rest; null keeps them as plaintext. */
  secretEncryptionKey: Buffer | null;
  /** Notify hooks: plain http allowed (tests), non-public ranges allowed, hooks per endpoint. */
  pushAllowHttp: boolean;
  notifyHookAllow: BlockList;
  notifyHookMax: number;
  /** SWITCHBOARD_INGEST_RATE: valid deliveries per second to one webhook before 429 (burst twice that). */
  ingestRate: number;
  /** Ports notify hooks may call (SWITCHBOARD_NOTIFY_HOOK_PORTS): a list (default 80, 443), or 'any'. */
  notifyHookPorts: readonly number[] | 'any';
  /** Live MCP sessions one endpoint may hold on one instance. */
  sessionsPerEndpoint: number;
  /** How long finished todos, their events and doorbell rings are kept; also the signed-replay window. */
  retentionMs: number;
  /** Board sign-in through an OpenID Connect provider; null when not configured. */
  oidc: OidcSettings | null;
  /** Reverse proxies whose X-Forwarded-For keys the per-address limits (addresses and CIDRs); empty trusts none. */
  trustedProxies: string[];
}

export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    message: string,
  ) {
    super(`config: ${variable} ${message}`);
    this.name = 'ConfigError';
  }
}

const LOG_LEVELS: readonly LogLevel[] = ['debug', 'info', 'warn', 'error'];
const LOG_FORMATS: readonly LogFormat[] = ['json', 'pretty', 'auto'];

/** Where persistent state lives when SWITCHBOARD_DATA_DIR is unset. */
export function defaultDataDir(env: NodeJS.ProcessEnv = process.env): string {
  // root's home is not traversable by the unprivileged user the embedded PostgreSQL runs as.
  if (process.getuid?.() === 0) return '/var/lib/switchboard';
  const xdg = env.XDG_DATA_HOME;
  return join(xdg && xdg.startsWith('/') ? xdg : join(homedir(), '.local', 'share'), 'switchboard');
}

function parseListen(raw: string): { host: string; port: number } {
  const m = /^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+)?:(\d{1,5})$/.exec(raw.trim());
  if (!m) throw new ConfigError('SWITCHBOARD_LISTEN', `must be HOST:PORT (e.g. 127.0.0.1:8080), got ${JSON.stringify(raw)}`);
  const port = Number(m[2]);
  if (port > 65535) throw new ConfigError('SWITCHBOARD_LISTEN', `port ${port} is out of range (0-65535)`);
  const host = (m[1] ?? '127.0.0.1').replace(/^\[|\]$/g, '');
  return { host, port };
}

function parseBaseUrl(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ConfigError('SWITCHBOARD_BASE_URL', `must be an absolute http(s) URL, got ${JSON.stringify(raw)}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new ConfigError('SWITCHBOARD_BASE_URL', `must use http or https, got ${url.protocol}`);
  }
  if (url.search || url.hash || url.username || url.password) {
    throw new ConfigError('SWITCHBOARD_BASE_URL', 'must not carry credentials, a query or a fragment');
  }
  return url.toString().replace(/\/+$/, '');
}

function parseDatabaseUrl(variable: string, raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ConfigError(variable, 'is not a valid URL (expected postgres://user:pass@host:port/db)');
  }
  if (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:') {
    throw new ConfigError(variable, `must start with postgres:// or postgresql://, got ${url.protocol}//`);
  }
  return raw;
}

/** SWITCHBOARD_TRUSTED_PROXIES: comma-separated IPv4/IPv6 addresses and CIDRs. */
function parseTrustedProxies(raw: string | undefined): string[] {
  const entries = (raw ?? '').split(',').map((p) => p.trim()).filter(Boolean);
  for (const entry of entries) {
    const m = /^([^/%]+)(?:\/(\d{1,3}))?$/.exec(entry);
    const family = m ? isIP(m[1]!) : 0;
    if (!m || family === 0 || (m[2] !== undefined && Number(m[2]) > (family === 4 ? 32 : 128))) {
      throw new ConfigError('SWITCHBOARD_TRUSTED_PROXIES', `must list IP addresses or CIDRs (e.g. 10.0.0.5,10.1.0.0/16,fd00::/8); ${JSON.stringify(entry)} is neither`);
    }
  }
  return entries;
}

/** An MCP session with no open stream and no call for this long is dead and ends (SWITCHBOARD_SESSION_IDLE). */
export const SESSION_IDLE_DEFAULT_MS = 5 * 60_000;

/** A window in the one duration grammar (`15m`, `1h`, `1h30m`), between `min` and `max` (written the same way). */
function parseWindow(variable: string, raw: string, min: string, max: string): number {
  const ms = parseDuration(raw);
  if (ms === null) throw new ConfigError(variable, `must be a duration like 15m, 1h or 1h30m, got ${JSON.stringify(raw)}`);
  if (ms < parseDuration(min)! || ms > parseDuration(max)!) throw new ConfigError(variable, `must be between ${min} and ${max}, got ${raw}`);
  return ms;
}

/** Reads and validates the environment. Throws ConfigError naming the variable on bad values. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const nonEmpty = (name: string): string | undefined => {
    const v = env[name];
    return v === undefined || v.trim() === '' ? undefined : v.trim();
  };

  let databaseUrl: string | undefined;
  const sbDb = nonEmpty('SWITCHBOARD_DATABASE_URL');
  const plainDb = nonEmpty('DATABASE_URL');
  if (sbDb) databaseUrl = parseDatabaseUrl('SWITCHBOARD_DATABASE_URL', sbDb);
  else if (plainDb) databaseUrl = parseDatabaseUrl('DATABASE_URL', plainDb);
  const listenDb = nonEmpty('SWITCHBOARD_LISTEN_DATABASE_URL');
  const listenDatabaseUrl = listenDb === undefined ? undefined : parseDatabaseUrl('SWITCHBOARD_LISTEN_DATABASE_URL', listenDb);
  if (listenDatabaseUrl && !databaseUrl) {
    throw new ConfigError('SWITCHBOARD_LISTEN_DATABASE_URL', 'is set, but SWITCHBOARD_DATABASE_URL is not; it names the direct connection beside a pooler URL (the embedded PostgreSQL needs neither)');
  }

  const { host, port } = parseListen(nonEmpty('SWITCHBOARD_LISTEN') ?? '127.0.0.1:8080');

  const rawBase = nonEmpty('SWITCHBOARD_BASE_URL');
  const displayHost = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host.includes(':') ? `[${host}]` : host;
  const baseUrl = rawBase ? parseBaseUrl(rawBase) : `http://${displayHost}:${port}`;

  const dataDirRaw = nonEmpty('SWITCHBOARD_DATA_DIR');
  const dataDirRelative = dataDirRaw !== undefined && !isAbsolute(dataDirRaw) ? dataDirRaw : undefined;
  const dataDir = dataDirRaw === undefined ? defaultDataDir(env) : resolve(dataDirRaw);

  const levelRaw = (nonEmpty('SWITCHBOARD_LOG_LEVEL') ?? 'info').toLowerCase();
  if (!LOG_LEVELS.includes(levelRaw as LogLevel)) {
    throw new ConfigError('SWITCHBOARD_LOG_LEVEL', `must be one of ${LOG_LEVELS.join(', ')}, got ${JSON.stringify(levelRaw)}`);
  }

  const formatRaw = (nonEmpty('SWITCHBOARD_LOG_FORMAT') ?? 'auto').toLowerCase();
  if (!LOG_FORMATS.includes(formatRaw as LogFormat)) {
    throw new ConfigError('SWITCHBOARD_LOG_FORMAT', `must be one of ${LOG_FORMATS.join(', ')}, got ${JSON.stringify(formatRaw)}`);
  }

  const ackWindowRaw = nonEmpty('SWITCHBOARD_DOORBELL_ACK_WINDOW');
  const doorbellAckWindowMs = ackWindowRaw ? parseWindow('SWITCHBOARD_DOORBELL_ACK_WINDOW', ackWindowRaw, '1m', '6h') : 15 * 60_000;
  const sessionIdleRaw = nonEmpty('SWITCHBOARD_SESSION_IDLE');
  const sessionIdleMs = sessionIdleRaw ? parseWindow('SWITCHBOARD_SESSION_IDLE', sessionIdleRaw, '1m', '24h') : SESSION_IDLE_DEFAULT_MS;

  const metricsToken = nonEmpty('SWITCHBOARD_METRICS_TOKEN');
  if (metricsToken !== undefined) {
    const bytes = Buffer.byteLength(metricsToken);
    if (bytes < 32) throw new ConfigError('SWITCHBOARD_METRICS_TOKEN', `is ${bytes} bytes; it must be at least 32 (try: openssl rand -hex 32)`);
    if (!/^[\x21-\x7e]+$/.test(metricsToken)) throw new ConfigError('SWITCHBOARD_METRICS_TOKEN', 'must be printable ASCII without spaces');
  }

  const keyRaw = nonEmpty('SWITCHBOARD_SECRET_ENCRYPTION_KEY');
  const secretEncryptionKey = keyRaw === undefined ? null : decodeKey(keyRaw);
  if (keyRaw !== undefined && secretEncryptionKey === null) {
    throw new ConfigError('SWITCHBOARD_SECRET_ENCRYPTION_KEY', 'must decode (hex or base64) to exactly 32 bytes (try: openssl rand -hex 32)');
  }

  const allowHttpRaw = nonEmpty('SWITCHBOARD_PUSH_ALLOW_HTTP');
  if (allowHttpRaw !== undefined && !['0', '1', 'true', 'false'].includes(allowHttpRaw)) {
    throw new ConfigError('SWITCHBOARD_PUSH_ALLOW_HTTP', `must be 1 or 0, got ${JSON.stringify(allowHttpRaw)}`);
  }
  const allow = parseAllowList(nonEmpty('SWITCHBOARD_NOTIFY_HOOK_ALLOW_CIDRS'));
  if (typeof allow === 'string') throw new ConfigError('SWITCHBOARD_NOTIFY_HOOK_ALLOW_CIDRS', allow);
  const hookPorts = parsePorts(nonEmpty('SWITCHBOARD_NOTIFY_HOOK_PORTS'));
  if (typeof hookPorts === 'string' && hookPorts !== 'any') throw new ConfigError('SWITCHBOARD_NOTIFY_HOOK_PORTS', hookPorts);
  const maxRaw = nonEmpty('SWITCHBOARD_NOTIFY_HOOK_MAX') ?? '5';
  if (!/^\d{1,3}$/.test(maxRaw) || Number(maxRaw) > 100) throw new ConfigError('SWITCHBOARD_NOTIFY_HOOK_MAX', `must be a whole number from 0 to 100, got ${JSON.stringify(maxRaw)}`);

  const ingestRateRaw = nonEmpty('SWITCHBOARD_INGEST_RATE') ?? '100';
  if (!/^\d{1,6}$/.test(ingestRateRaw) || Number(ingestRateRaw) < 1 || Number(ingestRateRaw) > 100_000) {
    throw new ConfigError('SWITCHBOARD_INGEST_RATE', `must be a whole number of deliveries per second from 1 to 100000, got ${JSON.stringify(ingestRateRaw)}`);
  }

  const perEndpointRaw = nonEmpty('SWITCHBOARD_SESSIONS_PER_ENDPOINT') ?? '32';
  if (!/^\d{1,4}$/.test(perEndpointRaw) || Number(perEndpointRaw) < 1 || Number(perEndpointRaw) > 1000) {
    throw new ConfigError('SWITCHBOARD_SESSIONS_PER_ENDPOINT', `must be a whole number from 1 to 1000, got ${JSON.stringify(perEndpointRaw)}`);
  }

  const retentionRaw = nonEmpty('SWITCHBOARD_RETENTION') ?? '720h';
  const retentionMs = parseDuration(retentionRaw);
  if (retentionMs === null || retentionMs < 3_600_000) {
    throw new ConfigError('SWITCHBOARD_RETENTION', `must be a duration of at least 1h like 720h (30 days) or 168h, got ${JSON.stringify(retentionRaw)}`);
  }

  const oidc = parseOidc(nonEmpty);
  const trustedProxies = parseTrustedProxies(nonEmpty('SWITCHBOARD_TRUSTED_PROXIES'));

  return {
    databaseUrl,
    listenDatabaseUrl,
    listenHost: host,
    listenPort: port,
    baseUrl,
    baseUrlExplicit: rawBase !== undefined,
    dataDir,
    dataDirRelative,
    logLevel: levelRaw as LogLevel,
    logFormat: formatRaw as LogFormat,
    doorbellAckWindowMs,
    sessionIdleMs,
    metricsToken,
    secretEncryptionKey,
    pushAllowHttp: allowHttpRaw === '1' || allowHttpRaw === 'true',
    notifyHookAllow: allow,
    notifyHookPorts: hookPorts,
    notifyHookMax: Number(maxRaw),
    ingestRate: Number(ingestRateRaw),
    sessionsPerEndpoint: Number(perEndpointRaw),
    retentionMs,
    oidc,
    trustedProxies,
  };
}

/**
 * SECURITY: the board trusts whoever this issuer vouches for, with no `amr`/`acr` check (see
 * src/board/oidc.ts). A provider that accepts weaker logins than passkeys needs step-up there
 * before it is configured here.
 */
function parseOidc(nonEmpty: (name: string) => string | undefined): OidcSettings | null {
  const issuerRaw = nonEmpty('SWITCHBOARD_OIDC_ISSUER');
  const clientId = nonEmpty('SWITCHBOARD_OIDC_CLIENT_ID');
  const clientSecret = nonEmpty('SWITCHBOARD_OIDC_CLIENT_SECRET');
  const redirectRaw = nonEmpty('SWITCHBOARD_OIDC_REDIRECT_URL');
  if (issuerRaw === undefined) {
    const stray = [clientId && 'SWITCHBOARD_OIDC_CLIENT_ID', clientSecret && 'SWITCHBOARD_OIDC_CLIENT_SECRET', redirectRaw && 'SWITCHBOARD_OIDC_REDIRECT_URL'].filter(Boolean);
    if (stray.length) throw new ConfigError('SWITCHBOARD_OIDC_ISSUER', `is unset, but ${stray.join(' and ')} ${stray.length > 1 ? 'are' : 'is'} set; set the issuer URL too, or unset them`);
    return null;
  }
  let issuer: URL;
  try {
    issuer = new URL(issuerRaw);
  } catch {
    throw new ConfigError('SWITCHBOARD_OIDC_ISSUER', `must be the provider's issuer URL (https://…), got ${JSON.stringify(issuerRaw)}`);
  }
  if (issuer.protocol !== 'https:' && !(issuer.protocol === 'http:' && issuerAllowsHttp(issuer.href))) {
    throw new ConfigError('SWITCHBOARD_OIDC_ISSUER', 'must use https (plain http only for a provider on this host, such as http://127.0.0.1:9000)');
  }
  if (clientId === undefined) throw new ConfigError('SWITCHBOARD_OIDC_CLIENT_ID', 'must be set when SWITCHBOARD_OIDC_ISSUER is (the client id registered at the provider)');
  let redirectUrl: string | undefined;
  if (redirectRaw !== undefined) {
    let url: URL;
    try {
      url = new URL(redirectRaw);
    } catch {
      throw new ConfigError('SWITCHBOARD_OIDC_REDIRECT_URL', `must be an absolute http(s) URL, got ${JSON.stringify(redirectRaw)}`);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new ConfigError('SWITCHBOARD_OIDC_REDIRECT_URL', `must use http or https, got ${url.protocol}`);
    redirectUrl = url.href;
  }
  // The issuer identifier is compared byte for byte with the ID token's iss: keep it as written.
  return { issuer: issuerRaw, clientId, clientSecret, redirectUrl };
}
