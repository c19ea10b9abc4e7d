import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SWITCHBOARD_BIN } from './support/processes.ts';

/** `switchboard serve` on a port another process holds: refused before any database work. */
let dataDir: string;
let holder: Server;
let port: number;

beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), 'sbport-'));
  holder = createServer();
  await new Promise<void>((r) => holder.listen(0, '127.0.0.1', r));
  port = (holder.address() as { port: number }).port;
});
afterAll(async () => {
  await new Promise((r) => holder.close(r));
  await rm(dataDir, { recursive: true, force: true });
});

describe('switchboard serve on a taken port', () => {
  it('exits 1 naming SWITCHBOARD_LISTEN and the address, before creating the embedded database', async () => {
    const env = { PATH: process.env.PATH, HOME: dataDir, SWITCHBOARD_DATA_DIR: dataDir, SWITCHBOARD_LISTEN: `127.0.0.1:${port}` };
    const { code, stderr } = await new Promise<{ code: number; stderr: string }>((resolve) =>
      execFile(process.execPath, [SWITCHBOARD_BIN, 'serve'], { env, timeout: 60_000 }, (err, _out, stderr) =>
        resolve({ code: err ? Number((err as { code?: number }).code ?? -1) : 0, stderr }),
      ),
    );
    expect(code, stderr).toBe(1);
    expect(stderr).toContain('SWITCHBOARD_LISTEN');
    expect(stderr).toContain(`127.0.0.1:${port} is already in use`);
    expect(existsSync(join(dataDir, 'pgdata'))).toBe(false);
  });
});
