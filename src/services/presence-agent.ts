import { AGENT, parseActor } from '../domain/actor.ts';
import { SwitchboardError } from '../domain/errors.ts';
import { parseClockInDuration, planClockIn, planClockOut, type PresenceInputs } from '../domain/presence/index.ts';
import { handleOf } from '../store/humans.ts';
import type { ServiceBase } from './base.ts';
import type { PresenceService, PresenceView } from './presence.ts';

type OverrideColumns = Pick<PresenceInputs, 'override' | 'overrideUntil' | 'overrideSetAt' | 'overrideBy'>;

const sameOverride = (a: OverrideColumns, b: OverrideColumns) =>
  a.override === b.override &&
  a.overrideBy === b.overrideBy &&
  a.overrideUntil?.getTime() === b.overrideUntil?.getTime() &&
  a.overrideSetAt?.getTime() === b.overrideSetAt?.getTime();

const noLongerActive = () => new SwitchboardError('forbidden', 'this endpoint is no longer active');

/**
 * An agent's own presence verbs (SPEC-0022): clock in, clock out, and read where it stands. Each
 * acts on the caller's endpoint only; a plan that changes nothing writes nothing.
 */
export class AgentPresence {
  constructor(
    private readonly base: Pick<ServiceBase, 'clock' | 'sql'>,
    private readonly presence: PresenceService,
  ) {}

  view(endpointId: string): Promise<PresenceView> {
    return this.presence.view(endpointId);
  }

  /** `forText`: clock_in's `for` as the agent sent it (undefined: the default hour). */
  async clockIn(endpointId: string, forText: unknown): Promise<PresenceView> {
    const forMs = parseClockInDuration(forText);
    const inputs = await this.#inputs(endpointId);
    const plan = planClockIn(inputs, this.base.clock.now(), forMs, await this.#operatorName(inputs.overrideBy));
    await this.#apply(endpointId, inputs, plan);
    return this.view(endpointId);
  }

  async clockOut(endpointId: string): Promise<PresenceView> {
    const inputs = await this.#inputs(endpointId);
    await this.#apply(endpointId, inputs, planClockOut(inputs, this.base.clock.now()));
    return this.view(endpointId);
  }

  /** `operator:<id>` as the human's handle, for a refusal the agent reads; the raw value otherwise. */
  async #operatorName(overrideBy: string | null): Promise<string | null> {
    const by = parseActor(overrideBy);
    if (by?.kind !== 'operator') return overrideBy;
    return (await handleOf(this.base.sql, by.humanId)) ?? overrideBy;
  }

  async #inputs(endpointId: string): Promise<PresenceInputs> {
    const inputs = await this.presence.inputs(endpointId);
    if (!inputs) throw noLongerActive();
    return inputs;
  }

  async #apply(endpointId: string, current: OverrideColumns, plan: Parameters<PresenceService['setOverride']>[1]): Promise<void> {
    if (sameOverride(plan, current)) return;
    if (!(await this.presence.setOverride(endpointId, plan, AGENT))) throw noLongerActive();
  }
}
