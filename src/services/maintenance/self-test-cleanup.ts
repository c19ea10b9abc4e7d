import { SELF_TEST_CLEANUP_INTERVAL_MS, type SelfTests } from '../doorbell/self-tests.ts';
import type { MaintenanceLoop } from './loop.ts';

/** Deletes expired self-test todos and reports, and ring records past their retention. */
export const selfTestCleanupLoop = (selfTests: SelfTests): MaintenanceLoop => ({
  name: 'self-test-cleanup',
  intervalMs: SELF_TEST_CLEANUP_INTERVAL_MS,
  tick: () => selfTests.cleanUp(),
});
