import { readdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * Store functions that cross tenants (no caller, or a credential that is itself the grant) end in
 * `Unscoped`. This list makes adding one a decision a reviewer sees: every other statement
 * carries the caller's endpoint or human.
 */
const UNSCOPED = {
  'endpoints.ts': ['activeEndpointAtUnscoped', 'authenticateEndpointCredentialUnscoped', 'inactiveEndpointIdsUnscoped'],
  'history/maintain.ts': ['foldHistoryDeltasUnscoped', 'pruneHistoryUnscoped'],
  'hooks.ts': ['countHooksUnscoped', 'legacyHookSecretsUnscoped', 'resealHookSecretsUnscoped'],
  'instances.ts': ['reapDeadInstancesUnscoped'],
  'oauth/grants.ts': ['revokedGrantIdsUnscoped'],
  'oauth/tokens.ts': ['deleteExpiredOAuthRowsUnscoped', 'resolveAccessTokenUnscoped'],
  'presence.ts': ['presenceWatchlistUnscoped'],
  'presence-history/prune.ts': ['deleteOldPresenceHistoryUnscoped'],
  'retention.ts': ['deleteFinishedTodosUnscoped', 'deleteOldReplayKeysUnscoped', 'deleteOrphanEventsUnscoped', 'deleteTodolessEventsUnscoped'],
  'rings.ts': ['markUnheardRingsUnscoped', 'pruneRingsUnscoped'],
  'sessions.ts': ['expireIdleSessionsUnscoped', 'markUnheardSessionsUnscoped'],
  'selftests.ts': ['cleanUpSelfTestsUnscoped', 'overdueTestsUnscoped', 'selfTestEndpointUnscoped', 'settleUnrungTestsUnscoped'],
  'todos/push.ts': ['chargeDueRingsUnscoped'],
  'todos/reads.ts': ['queueStatsUnscoped', 'todoQueueUnscoped'],
  'todos/sweeps.ts': ['reapExpiredLeasesUnscoped', 'releaseDueDelayedUnscoped', 'requeueDueRetriesUnscoped'],
  'webhook-refusals.ts': ['deleteOldWebhookRefusalsUnscoped'],
  'webhooks.ts': ['countSignedWebhooksUnscoped', 'findIngestTargetUnscoped', 'legacyWebhookSecretsUnscoped', 'resealWebhookSecretUnscoped'],
};

const storeDir = fileURLToPath(new URL('.', import.meta.url));
// index.ts files only re-export.
const modules = (dir: string): string[] =>
  readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? modules(join(dir, e.name)) : e.name.endsWith('.ts') && !e.name.endsWith('.test.ts') && e.name !== 'index.ts' ? [join(dir, e.name)] : [],
  );

describe('store functions that cross tenants', () => {
  it('are exactly the listed ones', async () => {
    const found: Record<string, string[]> = {};
    for (const file of modules(storeDir)) {
      const names = Object.keys(await import(file)).filter((n) => n.endsWith('Unscoped')).sort();
      if (names.length > 0) found[relative(storeDir, file)] = names;
    }
    expect(found).toEqual(UNSCOPED);
  });
});
