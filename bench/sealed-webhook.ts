/**
 * A signed GitHub webhook on a new endpoint, written through the store as the webhook service
 * writes it (the secret sealed under the instances' key, bound to its row): the API's write limit
 * (5/s a token) would take minutes for the thousands of webhooks bench:instances and bench:storm make.
 */
import type { Sql } from '../src/db/connect.ts';
import { systemClock } from '../src/lib/clock.ts';
import { sealedFor, type SecretBox } from '../src/lib/crypto-box.ts';
import { vendEndpoint } from '../src/store/endpoints.ts';
import { createWebhook } from '../src/store/webhooks.ts';

export interface SealedWebhook {
  endpointId: string;
  /** The ingest URL at `baseUrl`. */
  url: string;
  secret: string;
}

export async function sealedWebhook(sql: Sql, humanId: string, box: SecretBox, name: string, baseUrl: string): Promise<SealedWebhook> {
  const now = systemClock.now();
  const { endpoint } = await vendEndpoint(sql, humanId, { name, queues: ['issues'] }, now);
  const minted = await createWebhook(
    sql,
    { endpointId: endpoint.id, source: 'github', queue: 'issues', createdBy: `operator:${humanId}`, ceiling: 10, seal: (secret, id) => box.for(sealedFor('webhooks', id)).seal(secret) },
    now,
  );
  return { endpointId: endpoint.id, url: `${baseUrl}/webhooks/w/${minted.ingestToken}`, secret: minted.signingSecret! };
}
