import { operatorActor } from '../domain/actor.ts';
import { audit } from '../lib/audit.ts';
import {
  endpointRevoked,
  listOwnEndpoints,
  listOwnEndpointsPage,
  resolveOwnEndpoint,
  revokeOwnEndpoint,
  vendEndpoint,
  type Endpoint,
  type VendInput,
} from '../store/endpoints.ts';
import type { ServiceBase } from './base.ts';

export type { Endpoint, VendInput };

/** One page of a human's endpoints (EndpointService.listOwnPage). */
export interface EndpointPage {
  endpoints: Endpoint[];
  /** How many the human has in that state, on every page. */
  total: number;
  /** This page, 1-based, and how many there are (at least 1). */
  page: number;
  pages: number;
  size: number;
}

/** An endpoint as the services that act for it take it: id, slug and its queues. */
export const ownerOf = (e: Endpoint): { id: string; slug: string; queues: readonly string[] } => ({ id: e.id, slug: e.slug, queues: e.scope_queues });

/** The one "still active" rule: a revoked endpoint answers 409 with its slug and state. */
export function requireActive(endpoint: Endpoint): Endpoint {
  if (endpoint.state !== 'active') throw endpointRevoked(endpoint);
  return endpoint;
}

/**
 * A conditional write that found the endpoint no longer active (it lost a race with revocation)
 * answers exactly like the revocation.
 */
export function mustStillBeActive(written: boolean, endpoint: Pick<Endpoint, 'slug'>): void {
  if (!written) throw endpointRevoked({ slug: endpoint.slug, state: 'revoked' });
}

/**
 * A human's endpoints: resolve one by slug or id (another human's answers like a missing one),
 * vend, revoke, list. Every surface asks here, so ownership and "active" are decided once.
 */
export class EndpointService {
  readonly #base: ServiceBase;
  readonly #onRevoked: (endpointId: string) => void;

  /** `onRevoked` runs after a revocation commits (this instance drops the endpoint's sessions). */
  constructor(base: ServiceBase, opts: { onRevoked?: (endpointId: string) => void } = {}) {
    this.#base = base;
    this.#onRevoked = opts.onRevoked ?? (() => {});
  }

  /** One of the human's endpoints, in any state. */
  requireOwn(humanId: string, ref: string): Promise<Endpoint> {
    return resolveOwnEndpoint(this.#base.sql, humanId, ref);
  }

  /** One of the human's endpoints that is still active. */
  async requireOwnActive(humanId: string, ref: string): Promise<Endpoint> {
    return requireActive(await this.requireOwn(humanId, ref));
  }

  /** Active endpoints first, then newest. */
  listOwn(humanId: string): Promise<Endpoint[]> {
    return listOwnEndpoints(this.#base.sql, humanId);
  }

  /**
   * Page `page` (1-based, past the last: the last) of the human's endpoints in `state`, `size` a
   * page, newest first, with how many there are and how many pages they fill (at least one).
   */
  async listOwnPage(humanId: string, state: 'active' | 'revoked', page: number, size: number): Promise<EndpointPage> {
    const at = Math.max(1, Math.floor(page));
    let { rows, total } = await listOwnEndpointsPage(this.#base.sql, humanId, state, { offset: (at - 1) * size, limit: size });
    const pages = Math.max(1, Math.ceil(total / size));
    if (at > pages) ({ rows, total } = await listOwnEndpointsPage(this.#base.sql, humanId, state, { offset: (pages - 1) * size, limit: size }));
    return { endpoints: rows, total, page: Math.min(at, pages), pages, size };
  }

  /** The credential is returned once, here. */
  async vend(humanId: string, input: VendInput): Promise<{ endpoint: Endpoint; credential: string }> {
    const vended = await vendEndpoint(this.#base.sql, humanId, input, this.#base.clock.now());
    const { endpoint } = vended;
    audit(this.#base.log, 'endpoint.vend', operatorActor(humanId), { endpoint_id: endpoint.id, slug: endpoint.slug, queues: endpoint.scope_queues, verbs: endpoint.scope_verbs });
    return vended;
  }

  /** Revokes and dead-letters its live todos; other instances learn of it by notification. */
  async revoke(humanId: string, ref: string): Promise<{ endpoint: Endpoint; deadLettered: number }> {
    const revoked = await revokeOwnEndpoint(this.#base.sql, humanId, ref, this.#base.clock.now());
    audit(this.#base.log, 'endpoint.revoke', operatorActor(humanId), { endpoint_id: revoked.endpoint.id, slug: revoked.endpoint.slug, todos_dead_lettered: revoked.deadLettered });
    this.#onRevoked(revoked.endpoint.id);
    return revoked;
  }
}
