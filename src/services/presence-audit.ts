import { actorLabel, type PresenceActor } from '../domain/actor.ts';
import { effective, untilOnWire } from '../domain/presence/index.ts';
import { rfc3339 } from '../domain/time.ts';
import type { Logger } from '../lib/log.ts';
import type { PresenceWrite } from '../store/presence.ts';
import { inputsOf } from './presence-cache.ts';

/**
 * The audit line of one presence write (SPEC-0022 REQ "Presence Error Handling and Audit"), also
 * when it changes no presence (a shift edit, an operator clock-out while already out): the slug,
 * the effective presence before and after it, what decides now and until when, who and when.
 */
export function logPresenceWrite(log: Logger, what: 'override' | 'shift', write: PresenceWrite, by: PresenceActor, at: Date): void {
  const before = effective(inputsOf(write.before), at);
  const after = effective(inputsOf(write.after), at);
  log.info(
    {
      slug: write.slug,
      write: what,
      by: actorLabel(by),
      at: rfc3339(at),
      from: before.presence,
      to: after.presence,
      source: after.source,
      until: untilOnWire(after.until),
    },
    'presence written',
  );
}
