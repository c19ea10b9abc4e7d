import type { TestProject } from 'vitest/node';
import { startThrowawayCluster, sweepThrowawayClusters } from './support/throwaway-cluster.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Superuser URL of the test PostgreSQL server; use test/support/database.ts to get a database. */
    pgAdminUrl: string;
  }
}

// Starts one throwaway PostgreSQL server for the whole run (unless TEST_DATABASE_URL
// names an existing one). Teardown stays silent: the summary reporter's line must
// be the last thing printed.
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const external = process.env['TEST_DATABASE_URL'];
  if (external) {
    project.provide('pgAdminUrl', external);
    return async () => undefined;
  }
  await sweepThrowawayClusters();
  const cluster = await startThrowawayCluster({ prefer: 'system' });
  project.provide('pgAdminUrl', cluster.url);
  return () => cluster.stop();
}
