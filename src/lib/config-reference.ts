/**
 * Every environment variable the server reads (src/config.ts), with its default and one line
 * about it: `switchboard serve --help` prints this table, and a test holds it to config.ts (a
 * variable config.ts reads must be here) and to the README's configuration table (same names,
 * same defaults). The README says each at length. It lives in lib/ rather than beside config.ts
 * because the CLI, a surface, may import lib/ but not another file at the top of src/.
 */
export interface ConfigVariable {
  name: string;
  /** As the README's Default column has it, without the backticks. */
  default: string;
  description: string;
}

export const CONFIG_VARIABLES: readonly ConfigVariable[] = [
  { name: 'SWITCHBOARD_DATABASE_URL', default: 'unset', description: 'PostgreSQL URL (postgres://user:pass@host:5432/db); unset runs the embedded PostgreSQL in the data dir' },
  { name: 'DATABASE_URL', default: 'unset', description: 'used when SWITCHBOARD_DATABASE_URL is unset' },
  { name: 'SWITCHBOARD_LISTEN_DATABASE_URL', default: 'unset', description: 'direct PostgreSQL URL for LISTEN and migrations when SWITCHBOARD_DATABASE_URL is a PgBouncer (transaction mode)' },
  { name: 'SWITCHBOARD_LISTEN', default: '127.0.0.1:8080', description: 'HOST:PORT to listen on' },
  { name: 'SWITCHBOARD_BASE_URL', default: 'http://<listen address>', description: 'public URL in every URL the server prints (MCP URLs); your https:// address behind a proxy' },
  { name: 'SWITCHBOARD_TRUSTED_PROXIES', default: 'unset (trust no proxy)', description: 'addresses and CIDRs of reverse proxies whose X-Forwarded-For keys the per-address limits' },
  {
    name: 'SWITCHBOARD_DATA_DIR',
    default: '~/.local/share/switchboard ($XDG_DATA_HOME/switchboard); /var/lib/switchboard as root',
    description: 'embedded database and state; a relative path is resolved against the working directory',
  },
  { name: 'SWITCHBOARD_LOG_LEVEL', default: 'info', description: 'debug, info, warn or error' },
  { name: 'SWITCHBOARD_LOG_FORMAT', default: 'auto', description: 'json, pretty, or auto: pretty when the log goes to a terminal, JSON otherwise' },
  { name: 'SWITCHBOARD_DOORBELL_ACK_WINDOW', default: '15m', description: 'how long a doorbell waits for a claim or ack_doorbell before it is unheard (1m to 6h)' },
  { name: 'SWITCHBOARD_METRICS_TOKEN', default: 'unset (/metrics closed)', description: 'bearer token for GET /metrics, at least 32 printable bytes' },
  { name: 'SWITCHBOARD_NOTIFY_HOOK_MAX', default: '5', description: 'notify hooks per endpoint (0-100)' },
  { name: 'SWITCHBOARD_INGEST_RATE', default: '100', description: 'valid deliveries per second to one webhook before 429, burst twice that (1-100000)' },
  { name: 'SWITCHBOARD_SESSION_IDLE', default: '5m', description: 'an MCP session with no stream and no request for this long ends on every instance (1m to 24h)' },
  { name: 'SWITCHBOARD_SESSIONS_PER_ENDPOINT', default: '32', description: 'live MCP sessions one endpoint may hold (1-1000)' },
  { name: 'SWITCHBOARD_RETENTION', default: '720h (30 days)', description: 'how long finished todos, their events and doorbell rings are kept (at least 1h)' },
  { name: 'SWITCHBOARD_NOTIFY_HOOK_ALLOW_CIDRS', default: 'unset', description: 'CIDRs notify hooks may call although not public (e.g. 10.0.0.0/8), on any port' },
  { name: 'SWITCHBOARD_NOTIFY_HOOK_PORTS', default: '80,443', description: 'ports notify hooks may call on public addresses, or any' },
  { name: 'SWITCHBOARD_PUSH_ALLOW_HTTP', default: 'unset', description: '1 lets notify hooks use plain http:// (tests and local receivers only)' },
  { name: 'SWITCHBOARD_OIDC_ISSUER', default: 'unset (sign-in by link only)', description: "the OpenID Connect provider's issuer URL (https://) for board sign-in" },
  { name: 'SWITCHBOARD_OIDC_CLIENT_ID', default: 'unset', description: "the board's client id at the provider; required with the issuer" },
  { name: 'SWITCHBOARD_OIDC_CLIENT_SECRET', default: 'unset (a public client: PKCE only)', description: 'the client secret, sent with HTTP Basic' },
  { name: 'SWITCHBOARD_OIDC_REDIRECT_URL', default: '<SWITCHBOARD_BASE_URL>/auth/callback', description: 'override behind a path-rewriting proxy' },
  {
    name: 'SWITCHBOARD_SECRET_ENCRYPTION_KEY',
    default: 'unset (plaintext, with a startup warning once signed webhooks or notify hooks exist)',
    description: '32 bytes, hex or base64: seals webhook and notify hook secrets with AES-256-GCM',
  },
];

/** The table as `serve --help` prints it: name and default on one line, the description under it. */
export function configReferenceText(): string {
  return CONFIG_VARIABLES.map((v) => `  ${v.name}  (default: ${v.default})\n      ${v.description}`).join('\n');
}
