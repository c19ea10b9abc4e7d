import { operatorActor } from '../domain/actor.ts';
import { parseShift, planOperatorClear, planOperatorSet, type Presence } from '../domain/presence/index.ts';
import type { ServiceBase } from './base.ts';
import { mustStillBeActive, requireActive, type Endpoint } from './endpoints.ts';
import type { PresenceService, PresenceView } from './presence.ts';

/**
 * The operator's presence controls (SPEC-0022), for /api/v1 and the board alike: set or clear an
 * endpoint's override, set its shift. The endpoint comes resolved and must be active; a write
 * that finds it revoked meanwhile answers like the revocation.
 */
export class OperatorPresence {
  constructor(
    private readonly base: Pick<ServiceBase, 'clock'>,
    private readonly presence: PresenceService,
  ) {}

  view(endpoint: Endpoint): Promise<PresenceView> {
    return this.presence.view(requireActive(endpoint).id);
  }

  /** An override by `operator:<humanId>` until `until` (null: no end of its own). */
  async set(humanId: string, endpoint: Endpoint, wanted: Presence, until: Date | null): Promise<void> {
    requireActive(endpoint);
    const inputs = await this.presence.inputs(endpoint.id);
    mustStillBeActive(inputs !== null, endpoint);
    const plan = planOperatorSet(inputs!, this.base.clock.now(), wanted, until, humanId);
    mustStillBeActive(await this.presence.setOverride(endpoint.id, plan, operatorActor(humanId)), endpoint);
  }

  async clear(humanId: string, endpoint: Endpoint): Promise<void> {
    requireActive(endpoint);
    mustStillBeActive(await this.presence.setOverride(endpoint.id, planOperatorClear(), operatorActor(humanId)), endpoint);
  }

  /** Stores the shift in its canonical form (parsed by the one shift grammar); null clears it. */
  async setShift(humanId: string, endpoint: Endpoint, shift: string | null): Promise<void> {
    requireActive(endpoint);
    const canonical = shift === null ? null : parseShift(shift).canonical;
    mustStillBeActive(await this.presence.setShift(endpoint.id, canonical, operatorActor(humanId)), endpoint);
  }
}
