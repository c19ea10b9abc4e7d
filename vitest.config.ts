import os from 'node:os';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    environment: 'node',
    include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
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
