import os from 'node:os';
import { configDefaults, defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    environment: 'node',
    include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
    // The fault-injection suite runs on its own: npm run test:faults (test/faults/vitest.config.ts).
    exclude: [...configDefaults.exclude, 'test/faults/**'],
    globalSetup: ['test/global-setup.ts'],
    reporters: ['default', './test/summary-reporter.ts'],
    pool: 'forks',
    // Vitest defaults to (cores - 1) workers, i.e. one on a 2-core machine; test
    // files mostly wait on PostgreSQL, so run at least two in parallel.
    maxWorkers: Math.max(2, os.availableParallelism()),
    testTimeout: 20_000,
    hookTimeout: 60_000,
  },
});
