import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { BlockList } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { loadConfig } from '../src/config.ts';
import { VERSION } from '../src/lib/version.ts';
import { createTestDatabase, type TestDatabase } from './support/database.ts';
import { spawnServe, stopAllServes } from './support/processes.ts';

/**
 * The image's files, checked with what runs here (no Docker engine on this machine or in CI): the
 * entry point script is run for real against a test database, compose.yaml is parsed, HAProxy
 * validates the balancer configuration, and the Dockerfile copies only files that exist.
 */
const run = promisify(execFile);
const root = fileURLToPath(new URL('..', import.meta.url));
const entrypoint = path.join(root, 'deploy/docker-entrypoint.sh');
const HAPROXY = '/usr/sbin/haproxy';
/** The entry point with the checkout standing in for the image's /app. */
const entrypointEnv = (extra: Record<string, string> = {}) => ({ PATH: process.env.PATH ?? '', HOME: tmpdir(), SWITCHBOARD_APP: root, ...extra });

let db: TestDatabase;
let scratch: string;

beforeAll(async () => {
  db = await createTestDatabase();
  scratch = await mkdtemp(path.join(tmpdir(), 'sb-container-'));
});
afterAll(async () => {
  await stopAllServes();
  await db?.drop();
  await rm(scratch, { recursive: true, force: true });
});

describe('deploy/docker-entrypoint.sh', () => {
  it('runs the switchboard command it is given', async () => {
    const { stdout } = await run('sh', [entrypoint, '--version'], { env: entrypointEnv() });
    expect(stdout.trim()).toBe(VERSION);
  });

  it('reads SWITCHBOARD_DATABASE_URL from a _FILE, says the embedded PostgreSQL is off, and serves', async () => {
    const secret = path.join(scratch, 'database-url');
    await writeFile(secret, `${db.url}\n`);
    const serve = await spawnServe({
      databaseUrl: db.url,
      env: { SWITCHBOARD_DATABASE_URL: undefined, SWITCHBOARD_DATABASE_URL_FILE: secret, SWITCHBOARD_APP: root },
      command: ['sh', entrypoint],
    });
    expect(serve.output()).toContain('switchboard-entrypoint: database from SWITCHBOARD_DATABASE_URL (embedded PostgreSQL off)');
    expect((await fetch(`${serve.url}/readyz`)).status).toBe(200);
  });

  it('refuses a variable set both directly and as a _FILE, naming both', async () => {
    const secret = path.join(scratch, 'token');
    await writeFile(secret, 'x\n');
    const err = await run('sh', [entrypoint, '--version'], {
      env: entrypointEnv({ SWITCHBOARD_METRICS_TOKEN: 'a', SWITCHBOARD_METRICS_TOKEN_FILE: secret }),
    }).catch((e: { code: number; stderr: string }) => e);
    expect(err).toMatchObject({ code: 2 });
    expect((err as { stderr: string }).stderr).toContain('both SWITCHBOARD_METRICS_TOKEN and SWITCHBOARD_METRICS_TOKEN_FILE are set');
  });

  it('refuses a _FILE it cannot read, naming it', async () => {
    const missing = path.join(scratch, 'no-such-file');
    const err = await run('sh', [entrypoint, '--version'], { env: entrypointEnv({ SWITCHBOARD_METRICS_TOKEN_FILE: missing }) }).catch(
      (e: { code: number; stderr: string }) => e,
    );
    expect(err).toMatchObject({ code: 2 });
    expect((err as { stderr: string }).stderr).toContain(`SWITCHBOARD_METRICS_TOKEN_FILE names ${missing}, which cannot be read`);
  });
});

describe('compose.yaml', () => {
  it('runs two instances on PostgreSQL 17 behind HAProxy, each on the shared database', async () => {
    const compose = parse(await readFile(path.join(root, 'compose.yaml'), 'utf8'), { merge: true }) as {
      services: Record<string, { image?: string; build?: string; environment?: Record<string, string>; depends_on?: unknown; volumes?: string[]; healthcheck?: unknown }>;
    };
    const { postgres, haproxy, ...rest } = compose.services;
    expect(postgres?.image).toBe('postgres:17');
    expect(postgres?.healthcheck).toBeDefined();
    const instances = Object.entries(rest);
    expect(instances.map(([name]) => name)).toEqual(['switchboard-1', 'switchboard-2']);
    for (const [, s] of instances) {
      expect(s.build).toBe('.');
      expect(s.environment?.SWITCHBOARD_DATABASE_URL).toMatch(/^postgres:\/\/switchboard:.*@postgres:5432\/switchboard$/);
      expect(s.depends_on).toMatchObject({ postgres: { condition: 'service_healthy' } });
    }
    expect(haproxy?.volumes).toContain('./deploy/haproxy.cfg:/usr/local/etc/haproxy/haproxy.cfg:ro');
  });
});

describe("compose.yaml's trusted proxies", () => {
  /** Docker's default address pools (172.17-172.31.0.0/16, 192.168.0.0/16 in /20s): one address of each kind. */
  const DOCKER_DEFAULT_POOL_ADDRESSES = ['172.17.0.3', '172.18.0.4', '172.31.255.2', '192.168.0.2', '192.168.240.5'];

  it('come from SWITCHBOARD_TRUSTED_PROXIES, defaulting to the ranges of Docker\'s default address pools, and the docs say so', async () => {
    // Compose interpolates ${VAR:-default}: parsed raw, the value is that expression, on both instances.
    const compose = parse(await readFile(path.join(root, 'compose.yaml'), 'utf8'), { merge: true }) as {
      services: Record<string, { environment?: Record<string, string> }>;
    };
    const values = ['switchboard-1', 'switchboard-2'].map((name) => compose.services[name]?.environment?.SWITCHBOARD_TRUSTED_PROXIES);
    const m = /^\$\{SWITCHBOARD_TRUSTED_PROXIES:-([^}]+)\}$/.exec(values[0] ?? '');
    expect(m, `SWITCHBOARD_TRUSTED_PROXIES is ${values[0]}`).not.toBeNull();
    expect(values[1]).toBe(values[0]);
    const fallback = m![1]!;
    // The default is a value the server takes, and it holds every network Docker makes by default.
    const trusted = loadConfig({ SWITCHBOARD_TRUSTED_PROXIES: fallback }).trustedProxies;
    const list = new BlockList();
    for (const entry of trusted) {
      const [address, prefix] = entry.split('/');
      if (prefix === undefined) list.addAddress(address!);
      else list.addSubnet(address!, Number(prefix));
    }
    for (const address of DOCKER_DEFAULT_POOL_ADDRESSES) expect(list.check(address), address).toBe(true);
    expect(list.check('10.10.0.2')).toBe(false);
    // The deploy guide and the README each say so in one paragraph (or list item): the variable, the
    // default, and when to set it.
    for (const doc of ['docs/deploy.md', 'README.md']) {
      const blocks = (await readFile(path.join(root, doc), 'utf8')).split(/\n\s*\n|\n- /).map((b) => b.replace(/\s+/g, ' '));
      const said = blocks.find((b) => b.includes('`SWITCHBOARD_TRUSTED_PROXIES`') && b.includes('`compose.yaml` takes'));
      expect(said, `${doc}: a paragraph saying compose.yaml takes SWITCHBOARD_TRUSTED_PROXIES`).toBeDefined();
      expect(said).toContain(`\`${fallback}\``);
      expect(said).toContain('default-address-pools');
    }
  });
});

describe('deploy/haproxy.cfg', () => {
  it.skipIf(!existsSync(HAPROXY))('is valid for HAProxy, balances both compose instances and checks /readyz', async () => {
    const cfg = await readFile(path.join(root, 'deploy/haproxy.cfg'), 'utf8');
    expect(cfg).toContain('option httpchk GET /readyz');
    expect(cfg).toMatch(/server switchboard-1 switchboard-1:8080/);
    expect(cfg).toMatch(/server switchboard-2 switchboard-2:8080/);
    // `init-addr none`: the check resolves no name, so it sends nothing off this machine.
    const { stdout, stderr } = await run(HAPROXY, ['-c', '-f', path.join(root, 'deploy/haproxy.cfg')]);
    expect(`${stdout}${stderr}`).toContain('Configuration file is valid');
  });
});

describe('Dockerfile', () => {
  it('builds in two stages, runs as a non-root user with a liveness health check, and copies only files that exist', async () => {
    const dockerfile = await readFile(path.join(root, 'Dockerfile'), 'utf8');
    const lines = dockerfile.split('\n').filter((l) => !l.startsWith('#'));
    expect(lines.filter((l) => l.startsWith('FROM '))).toHaveLength(2);
    expect(lines.filter((l) => l.startsWith('USER ')).at(-1)).toBe('USER switchboard:switchboard');
    expect(dockerfile).toMatch(/HEALTHCHECK [\s\S]*\/livez/);
    expect(dockerfile).toContain('ENTRYPOINT ["switchboard-entrypoint"]');
    const sources = lines
      .filter((l) => l.startsWith('COPY ') && !l.startsWith('COPY --from'))
      .flatMap((l) => l.slice('COPY '.length).trim().split(/\s+/).slice(0, -1));
    expect(sources).toContain('deploy/docker-entrypoint.sh');
    for (const source of sources) expect(existsSync(path.join(root, source)), source).toBe(true);
  });
});
