import type { ServiceBase } from './base.ts';
import type { Clock } from '../lib/clock.ts';
import { audit } from '../lib/audit.ts';
import type { Logger } from '../lib/log.ts';
import { sealedFor, type SecretBox } from '../lib/crypto-box.ts';
import type { Sql } from '../db/connect.ts';
import { hashSecret } from '../lib/secrets.ts';
import { TtlCache } from '../lib/ttl-cache.ts';
import { notify } from '../store/channels.ts';
import type { WakeupHandlers } from './wakeups.ts';
import { actorLabel, type Actor } from '../domain/actor.ts';
import { scopedQueue } from '../domain/scope.ts';
import { SwitchboardError, invalidArgument } from '../domain/errors.ts';
import { rfc3339 } from '../domain/time.ts';
import { countHooksUnscoped, legacyHookSecretsUnscoped, resealHookSecretsUnscoped } from '../store/hooks.ts';
import {
  countSignedWebhooksUnscoped,
  legacyWebhookSecretsUnscoped,
  resealWebhookSecretUnscoped,
  SOURCE_TYPES,
  WEBHOOKS_PER_ENDPOINT_MAX,
  createWebhook,
  deleteWebhook,
  findIngestTargetUnscoped,
  getEndpointWebhook,
  getOwnWebhook,
  listEndpointEvents,
  listWebhooks,
  rotateWebhook,
  type EventSummary,
  type IngestTarget,
  type MintedWebhook,
  type SourceType,
  type WebhookRow,
} from '../store/webhooks.ts';

export { WEBHOOKS_PER_ENDPOINT_MAX, type EventSummary, type IngestTarget };

/** How long an ingest target stays cached with no invalidation heard (rotate and delete invalidate at once). */
export const INGEST_TARGET_CACHE_MS = 30_000;

export interface WebhookOwner {
  id: string;
  slug: string;
  queues: readonly string[];
}

/**
 * Managing webhooks, shared by the operator API, the CLI (through it) and the agent verbs. The
 * ingest URL and the signing secret are shown only when minted (create, rotate).
 */
export class Webhooks {
  private readonly sql: Sql;
  private readonly clock: Clock;
  private readonly log: Logger;
  /** Ingest targets by the hash of their token: a delivery costs no lookup while its webhook is unchanged. */
  readonly #targets: TtlCache<string, IngestTarget>;
  /**
   * Signing secrets already opened, by the row they were read from: a cached ingest target is one
   * object for its cache life, so each delivery to it does not decrypt again; a rotation reads a
   * new row object, which opens the new secret.
   */
  readonly #opened = new WeakMap<WebhookRow, string | null>();

  constructor(
    base: ServiceBase,
    private readonly box: SecretBox,
    private readonly baseUrl: () => string,
  ) {
    ({ sql: this.sql, clock: this.clock, log: this.log } = base);
    this.#targets = new TtlCache(this.clock, INGEST_TARGET_CACHE_MS);
  }

  /**
   * The webhook an ingest token names (null: none), from the cache while its webhook is unchanged.
   * Rotation and deletion forget it here at once and on every other instance by `webhook_changed`;
   * a revoked endpoint needs no invalidation, since the delivery's statement checks the endpoint.
   */
  async findIngestTarget(token: string): Promise<IngestTarget | null> {
    const key = hashSecret(token);
    const cached = this.#targets.get(key);
    if (cached) return cached;
    const mark = this.#targets.mark();
    const target = await findIngestTargetUnscoped(this.sql, token);
    if (target) this.#targets.setUnlessDropped(mark, key, target);
    return target;
  }

  /** What this service does on `webhook_changed`: forget that webhook's target; after a reconnect, all. */
  wakeups(): WakeupHandlers {
    return {
      webhook_changed: { onNotify: ({ webhookId }) => this.#forget(webhookId), onListen: () => this.#targets.clear() },
    };
  }

  #forget(webhookId: string): void {
    this.#targets.deleteWhere((t) => t.id === webhookId);
  }

  /** After a rotation, deletion or rules change committed: forgotten here at once, elsewhere when the NOTIFY arrives. */
  async afterChange(webhookId: string): Promise<void> {
    this.#forget(webhookId);
    await notify(this.sql, 'webhook_changed', { webhookId });
  }

  ingestUrl(token: string): string {
    return `${this.baseUrl()}/webhooks/w/${token}`;
  }

  /**
   * At startup, before serving: with a key set, every webhook and notify hook secret still stored
   * as `plain:` or as `v1:` (sealed before rows were bound) is accepted this once and resealed
   * bound to its row; without a key, the secrets that are (or will be) stored as plaintext are
   * counted for the startup warning.
   */
  async secretsAtRest(): Promise<{ resealed: number; plaintext: { webhooks: number; hooks: number } }> {
    let resealed = 0;
    if (this.box.encrypts) {
      for (const w of await legacyWebhookSecretsUnscoped(this.sql)) {
        const box = this.box.for(sealedFor('webhooks', w.id));
        if (await resealWebhookSecretUnscoped(this.sql, w.id, w.signing_secret, box.seal(box.openLegacy(w.signing_secret)!))) {
          resealed++;
          // Instances already serving hold the old form of the secret, which they now refuse.
          await this.afterChange(w.id);
        }
      }
      for (const h of await legacyHookSecretsUnscoped(this.sql)) {
        const box = this.box.for(sealedFor('notify_hooks', h.id));
        const reseal = (v: string) => {
          const open = box.openLegacy(v);
          return open === null ? v : box.seal(open);
        };
        const to = { secret: reseal(h.secret), prev_secret: h.prev_secret === null ? null : reseal(h.prev_secret) };
        if (await resealHookSecretsUnscoped(this.sql, h.id, h, to)) resealed++;
      }
    }
    if (this.box.encrypts) return { resealed, plaintext: { webhooks: 0, hooks: 0 } };
    const [webhooks, hooks] = await Promise.all([countSignedWebhooksUnscoped(this.sql), countHooksUnscoped(this.sql)]);
    return { resealed, plaintext: { webhooks, hooks } };
  }

  view(row: WebhookRow) {
    return {
      webhook_id: row.id,
      endpoint_id: row.endpoint_id,
      source_type: row.source_type,
      trust_mode: row.trust_mode,
      target_queue: row.target_queue,
      ingest_url_hint: `${this.baseUrl()}/webhooks/w/${row.ingest_token_hint}…`,
      created_by: row.created_by,
      created_at: rfc3339(row.created_at),
      rotated_at: rfc3339(row.rotated_at) ?? null,
      last_delivery_at: rfc3339(row.last_delivery_at) ?? null,
    };
  }

  #minted(m: MintedWebhook) {
    return {
      ...this.view(m.webhook),
      ingest_url: this.ingestUrl(m.ingestToken),
      ...(m.signingSecret ? { signing_secret: m.signingSecret } : {}),
    };
  }

  /**
   * Creates a webhook on `owner`. `by` is the agent (bounded by the vend-time ceiling, a queue outside
   * scope is forbidden) or an operator (a queue outside scope is an invalid argument).
   */
  async create(owner: WebhookOwner, input: { source_type?: unknown; target_queue?: unknown }, by: Actor, ceiling: number) {
    const source = input.source_type;
    if (typeof source !== 'string' || !(SOURCE_TYPES as readonly string[]).includes(source)) {
      throw invalidArgument('source_type', `must be one of ${SOURCE_TYPES.join(', ')}`);
    }
    const queue = scopedQueue(owner, 'target_queue', input.target_queue, by.kind === 'agent' ? 'agent' : 'operator');
    const minted = await createWebhook(
      this.sql,
      { endpointId: owner.id, source: source as SourceType, queue, createdBy: actorLabel(by), ceiling, seal: (s, id) => this.box.for(sealedFor('webhooks', id)).seal(s) },
      this.clock.now(),
    ).catch((err: unknown) => {
      if (err instanceof SwitchboardError && err.code === 'conflict' && by.kind === 'agent') {
        throw new SwitchboardError('forbidden', `${err.message} (the ceiling this endpoint was vended with)`, err.details);
      }
      throw err;
    });
    audit(this.log, 'webhook.create', by, { endpoint_id: owner.id, webhook_id: minted.webhook.id, source_type: source, target_queue: queue });
    return this.#minted(minted);
  }

  async list(endpointId: string) {
    return (await listWebhooks(this.sql, endpointId)).map((w) => this.view(w));
  }

  async rotate(row: WebhookRow, by: Actor) {
    const rotated = await rotateWebhook(this.sql, row, (s) => this.box.for(sealedFor('webhooks', row.id)).seal(s), this.clock.now());
    await this.afterChange(row.id);
    audit(this.log, 'webhook.rotate', by, { endpoint_id: row.endpoint_id, webhook_id: row.id });
    return this.#minted(rotated);
  }

  async delete(row: WebhookRow, by: Actor) {
    await deleteWebhook(this.sql, row.id);
    await this.afterChange(row.id);
    audit(this.log, 'webhook.delete', by, { endpoint_id: row.endpoint_id, webhook_id: row.id });
    return { webhook_id: row.id, deleted: true };
  }

  /** One of the human's webhooks; another human's answers like a missing one. */
  ownWebhook(humanId: string, webhookId: string): Promise<WebhookRow> {
    return getOwnWebhook(this.sql, humanId, webhookId);
  }

  /** One webhook of the endpoint; another endpoint's answers like a missing one. */
  endpointWebhook(endpointId: string, webhookId: string): Promise<WebhookRow> {
    return getEndpointWebhook(this.sql, endpointId, webhookId);
  }

  /** Delivery history of one endpoint, newest first. */
  events(endpointId: string, limit: number): Promise<EventSummary[]> {
    return listEndpointEvents(this.sql, endpointId, limit);
  }

  openSecret(row: WebhookRow): string | null {
    if (this.#opened.has(row)) return this.#opened.get(row)!;
    const secret = row.signing_secret ? this.box.for(sealedFor('webhooks', row.id)).open(row.signing_secret) : null;
    this.#opened.set(row, secret);
    return secret;
  }
}
