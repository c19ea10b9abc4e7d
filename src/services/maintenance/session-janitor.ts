import type { SessionDirectory } from '../session-directory.ts';
import type { MaintenanceLoop } from './loop.ts';

export const SESSION_JANITOR_INTERVAL_MS = 60_000;

/** Ends MCP sessions idle across the cluster, and forgets copies idle on this instance. */
export const sessionJanitorLoop = (directory: SessionDirectory): MaintenanceLoop => ({
  name: 'session-janitor',
  intervalMs: SESSION_JANITOR_INTERVAL_MS,
  tick: async () => directory.expireIdle(),
});
