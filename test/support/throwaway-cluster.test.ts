import { existsSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { startThrowawayCluster } from './throwaway-cluster.ts';
import { postmasterPid, running, track, useClusterCleanups, waitFor, withSql } from './cluster-checks.ts';

// The throwaway PostgreSQL cluster the test run and the benchmarks use.

useClusterCleanups();

describe('startThrowawayCluster', () => {
  it('answers queries and stop() removes its directory', async () => {
    const cluster = track(await startThrowawayCluster());
    expect(path.basename(cluster.dataDir)).toMatch(/^sbpg-/);
    const [row] = await withSql(cluster.url, (sql) => sql`select 1 as one`);
    expect(row?.['one']).toBe(1);

    const pid = postmasterPid(cluster.pgData);
    await cluster.stop();
    expect(existsSync(cluster.dataDir)).toBe(false);
    if (pid) await waitFor(() => !running(pid), 'throwaway server to exit');
  });
});