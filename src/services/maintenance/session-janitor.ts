import type { SessionDirectory } from '../session-directory.ts';
import type { MaintenanceLoop } from './loop.ts';

export const SESSION_JANITOR_INTERVAL_MS = 60_000;

/**
 * Ends MCP sessions idle across the cluster, forgets copies idle on this instance, and ends the
 * streams here whose OAuth access token has expired (at most an interval after the expiry).
 */
export const sessionJanitorLoop = (directory: SessionDirectory): MaintenanceLoop => ({
  name: 'session-janitor',
  intervalMs: SESSION_JANITOR_INTERVAL_MS,
  tick: async () => {
    const idle = await directory.expireIdle();
    return { idle, expiredAccessStreams: directory.endExpiredAccessStreams() };
  },
});
