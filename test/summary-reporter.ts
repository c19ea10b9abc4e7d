import type { SerializedError } from 'vitest';
import type { Reporter, TestModule, TestRunEndReason } from 'vitest/node';

/**
 * Prints `N passed, N failed` as the very last line of a run (skipped tests on the
 * line before). Modules that failed outside any test (import errors, failing
 * hooks), unhandled errors and aborted runs count as failures, so a broken run
 * never reports `0 failed`.
 */
export default class SummaryReporter implements Reporter {
  onTestRunEnd(
    testModules: ReadonlyArray<TestModule>,
    unhandledErrors: ReadonlyArray<SerializedError>,
    reason: TestRunEndReason,
  ): void {
    let passed = 0;
    let failed = 0;
    let skipped = 0;
    for (const testModule of testModules) {
      let failedInModule = 0;
      for (const test of testModule.children.allTests()) {
        const state = test.result().state;
        if (state === 'passed') passed++;
        else if (state === 'skipped') skipped++;
        else if (state === 'failed') failedInModule++;
      }
      const moduleBroken = testModule.state() === 'failed' || testModule.errors().length > 0;
      failed += failedInModule > 0 ? failedInModule : moduleBroken ? 1 : 0;
    }
    failed += unhandledErrors.length;
    if (reason !== 'passed' && failed === 0) failed = 1;

    if (skipped > 0) process.stdout.write(`${skipped} skipped\n`);
    process.stdout.write(`${passed} passed, ${failed} failed\n`);
  }
}
