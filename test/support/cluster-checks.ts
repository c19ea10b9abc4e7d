// Shared by the PostgreSQL cluster tests (src/db/cluster/embedded.test.ts, test/support/throwaway-cluster.test.ts).

import { readFileSync } from 'node:fs';
import path from 'node:path';
import postgres from 'postgres';
import { afterEach } from 'vitest';
import { type RunningCluster } from './throwaway-cluster.ts';

export const quiet = (): void => undefined;

export const cleanups: Array<() => Promise<unknown>> = [];

export function track(cluster: RunningCluster): RunningCluster {
  cleanups.push(() => cluster.stop());
  return cluster;
}

export async function withSql<T>(url: string, fn: (sql: postgres.Sql) => Promise<T>): Promise<T> {
  const sql = postgres(url, { max: 1, onnotice: quiet, connect_timeout: 5 });
  try {
    return await fn(sql);
  } finally {
    await sql.end({ timeout: 5 });
  }
}

export function postmasterPid(pgData: string): number | undefined {
  try {
    return Number(readFileSync(path.join(pgData, 'postmaster.pid'), 'utf8').split('\n')[0]);
  } catch {
    return undefined;
  }
}

export function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

export async function waitFor(condition: () => Promise<boolean> | boolean, what: string, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Runs the cleanups a test registered (servers, owner processes, temp dirs) after each test, newest first. */
export function useClusterCleanups(): void {
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
  });
}
