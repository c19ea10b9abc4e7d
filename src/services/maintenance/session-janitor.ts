import type { SessionRegistry } from '../../sessions/registry.ts';
import type { MaintenanceLoop } from './loop.ts';

export const SESSION_JANITOR_INTERVAL_MS = 60_000;

/** Closes MCP sessions of this instance that have been idle too long. */
export const sessionJanitorLoop = (sessions: SessionRegistry): MaintenanceLoop => ({
  name: 'session-janitor',
  intervalMs: SESSION_JANITOR_INTERVAL_MS,
  tick: async () => sessions.expireIdle(),
});
