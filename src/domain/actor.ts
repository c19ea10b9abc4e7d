/**
 * Who did something: the endpoint's own agent (its MCP session) or a human operator (/api/v1, the
 * board). Services take these values; the string form is made only by `actorLabel`, at the edges
 * (the columns that record who wrote a row, the audit and presence log lines), and read back only
 * by `parseActor`. The strings are the stored ones (`agent`, `operator:<human id>`, `shift`), so
 * no data changes with this type.
 */
export type Actor = { kind: 'agent' } | { kind: 'operator'; humanId: string };

export type OperatorActor = Extract<Actor, { kind: 'operator' }>;

/** Presence's changers (SPEC-0022) also count the shift: a transition no one wrote, or an override running out. */
export type PresenceActor = Actor | { kind: 'shift' };

/**
 * `switchboard admin`, acting outside any request: audit lines only. `label` is how the command
 * names itself (`admin:<os user>`), rendered by the CLI before it reaches the services.
 */
export type AdminActor = { kind: 'admin'; label: string };

/** Whom an audit line names. */
export type AuditActor = Actor | AdminActor;

export const AGENT: Readonly<Actor> = Object.freeze({ kind: 'agent' });
export const SHIFT: Readonly<PresenceActor> = Object.freeze({ kind: 'shift' });

const OPERATOR_PREFIX = 'operator:';

export function operatorActor(humanId: string): OperatorActor {
  return { kind: 'operator', humanId };
}

/** The one string form of an actor, as stored and logged: `agent`, `operator:<human id>`, `shift`. */
export function actorLabel(a: PresenceActor | AdminActor): string {
  switch (a.kind) {
    case 'agent':
      return 'agent';
    case 'operator':
      return `operator:${a.humanId}`;
    case 'shift':
      return 'shift';
    case 'admin':
      return a.label;
  }
}

/**
 * An actor read back from the database (override_by, presence_changed_by, ...): null for null and
 * for anything actorLabel does not write (an empty operator id, a legacy value), so each reader
 * decides what an unknown writer means to it.
 */
export function parseActor(s: string | null | undefined): PresenceActor | null {
  if (s === 'agent') return AGENT;
  if (s === 'shift') return SHIFT;
  if (typeof s === 'string' && s.startsWith(OPERATOR_PREFIX) && s.length > OPERATOR_PREFIX.length) return operatorActor(s.slice(OPERATOR_PREFIX.length));
  return null;
}
