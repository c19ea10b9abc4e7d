import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SWITCHBOARD_BIN } from './support/processes.ts';

/**
 * Admin commands on the embedded database with no server running: a data dir with no database is
 * refused unless --init (a second terminal without the server's SWITCHBOARD_DATA_DIR must not make
 * a new, empty one), and every command says which database it used.
 */
let home: string;

beforeAll(async () => {
  home = await mkdtemp(join(tmpdir(), 'sbadmin-'));
  // As root the cluster runs as the postgres user, which must be able to enter the data dir's parent.
  await chmod(home, 0o711);
});
afterAll(async () => {
  await rm(home, { recursive: true, force: true });
});

function cli(args: string[], env: Record<string, string>, cwd = home): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) =>
    execFile(process.execPath, [SWITCHBOARD_BIN, ...args], { cwd, timeout: 90_000, env: { PATH: process.env.PATH, HOME: home, ...env } }, (err, stdout, stderr) =>
      resolve({ code: err ? Number((err as { code?: number }).code ?? -1) : 0, stdout, stderr }),
    ),
  );
}

describe('switchboard admin on the embedded database', { timeout: 120_000 }, () => {
  it('refuses a data dir with no database, naming SWITCHBOARD_DATA_DIR and --init, and creates nothing', async () => {
    const dataDir = join(home, 'elsewhere');
    const r = await cli(['admin', 'human', 'add', 'ops'], { SWITCHBOARD_DATA_DIR: dataDir });
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toContain(`SWITCHBOARD_DATA_DIR names ${dataDir}, which holds no Switchboard database`);
    expect(r.stderr).toContain('--init');
    expect(r.stdout).not.toContain('Added');
    expect(existsSync(join(dataDir, 'pgdata'))).toBe(false);
  });

  it('creates it with --init, says which database it used, and the next command finds it without --init', async () => {
    const r = await cli(['admin', '--init', 'human', 'add', 'ops'], { SWITCHBOARD_DATA_DIR: 'data' });
    expect(r.code, r.stderr).toBe(0);
    const dataDir = join(home, 'data');
    expect(r.stderr).toContain(`SWITCHBOARD_DATA_DIR data is ${dataDir}`);
    expect(r.stderr).toContain(`switchboard: database: embedded PostgreSQL in ${dataDir}`);
    expect(existsSync(join(dataDir, 'pgdata', 'PG_VERSION'))).toBe(true);

    const list = await cli(['admin', 'human', 'list'], { SWITCHBOARD_DATA_DIR: dataDir });
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout).toContain('ops');
    expect(list.stderr).toContain(`switchboard: database: embedded PostgreSQL in ${dataDir}`);
  });
});
