import { cp, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect } from '../db/connect.ts';
import { migratedDatabase } from '../../test/support/app.ts';
import { LISTEN_PROBE_TIMEOUT_MS, Readiness } from './readiness.ts';

let db: Awaited<ReturnType<typeof migratedDatabase>>;
const heard = async () => true;

beforeAll(async () => {
  db = await migratedDatabase();
});
afterAll(async () => {
  await db?.drop();
});

describe('Readiness.check', () => {
  it('is ready when the database answers, every migration is applied and LISTEN hears', async () => {
    expect(await new Readiness(db.sql, () => heard).check()).toEqual({
      ready: true,
      checks: { database: 'ok', migrations: 'ok', listen: 'ok' },
    });
  });

  it('names a migration this build ships that the database has not applied', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'sb-migrations-'));
    try {
      await cp(fileURLToPath(new URL('../db/migrations/', import.meta.url)), dir, { recursive: true });
      await writeFile(path.join(dir, '9999_from_a_newer_build.sql'), 'select 1;\n');
      const report = await new Readiness(db.sql, () => heard, dir).check();
      expect(report).toEqual({
        ready: false,
        checks: { database: 'ok', migrations: 'pending: 9999_from_a_newer_build.sql', listen: 'ok' },
      });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('is not ready before LISTEN starts, nor when its probe does not come back', async () => {
    expect((await new Readiness(db.sql, () => undefined).check()).checks.listen).toBe('not listening yet');
    const deaf = await new Readiness(db.sql, () => async () => false).check();
    expect(deaf).toMatchObject({ ready: false, checks: { database: 'ok', migrations: 'ok' } });
    expect(deaf.checks.listen).toBe(`no notification came back within ${LISTEN_PROBE_TIMEOUT_MS} ms`);
  });

  it('says the database is unreachable when it is', async () => {
    const closed = connect('postgres://nobody@127.0.0.1:1/none', { max: 1 });
    try {
      const report = await new Readiness(closed, () => heard).check();
      expect(report.ready).toBe(false);
      expect(report.checks.database).toMatch(/^unreachable: /);
    } finally {
      await closed.end({ timeout: 1 });
    }
  });

  it('ping resolves while the database answers and rejects when it cannot be reached (/healthz)', async () => {
    await expect(new Readiness(db.sql, () => heard).ping()).resolves.toBeUndefined();
    const closed = connect('postgres://nobody@127.0.0.1:1/none', { max: 1 });
    try {
      await expect(new Readiness(closed, () => heard).ping()).rejects.toThrow();
    } finally {
      await closed.end({ timeout: 1 });
    }
  });
});
