import { SELF_TEST_CLEANUP_INTERVAL_MS, SELF_TEST_RING_INTERVAL_MS, type SelfTests } from '../doorbell/self-tests.ts';
import type { MaintenanceLoop } from './loop.ts';

/** Deletes expired self-test todos and reports, and ring records past their retention. */
export const selfTestCleanupLoop = (selfTests: SelfTests): MaintenanceLoop => ({
  name: 'self-test-cleanup',
  intervalMs: SELF_TEST_CLEANUP_INTERVAL_MS,
  tick: () => selfTests.cleanUp(),
});

/** Rings overdue self-tests from their stored ring time, and ends those that could not ring by report_after. */
export const selfTestRingLoop = (selfTests: SelfTests): MaintenanceLoop => ({
  name: 'self-test-ring',
  intervalMs: SELF_TEST_RING_INTERVAL_MS,
  tick: () => selfTests.ringOverdue(),
});
