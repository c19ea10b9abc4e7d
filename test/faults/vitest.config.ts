import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

/**
 * The fault-injection suite (`npm run test:faults`): only test/faults/, never part of `npm test`.
 * Same global PostgreSQL setup and summary line as the main suite. Files run one at a time: they
 * kill processes, restart a cluster and measure memory and latency, and must not disturb each
 * other's figures.
 */
export default defineConfig({
  root: fileURLToPath(new URL('../..', import.meta.url)),
  test: {
    environment: 'node',
    include: ['test/faults/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    reporters: ['default', './test/summary-reporter.ts'],
    pool: 'forks',
    fileParallelism: false,
    testTimeout: 90_000,
    hookTimeout: 90_000,
  },
});
