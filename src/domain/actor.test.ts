import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { actorLabel, AGENT, operatorActor, parseActor, SHIFT, type PresenceActor } from './actor.ts';

const HUMAN = '7c0c5b1e-2f4a-4d39-9a51-0e3d2b8f6a10';

describe('actorLabel', () => {
  it('writes the strings the columns and log lines have always held', () => {
    expect(actorLabel(AGENT)).toBe('agent');
    expect(actorLabel(operatorActor(HUMAN))).toBe(`operator:${HUMAN}`);
    expect(actorLabel(SHIFT)).toBe('shift');
    expect(actorLabel({ kind: 'admin', label: 'admin:root' })).toBe('admin:root');
  });
});

describe('parseActor', () => {
  it('reads back every label it writes', () => {
    const actor = fc.oneof(
      fc.constant<PresenceActor>(AGENT),
      fc.constant<PresenceActor>(SHIFT),
      fc.string({ minLength: 1 }).map((id): PresenceActor => operatorActor(id)),
    );
    fc.assert(fc.property(actor, (a) => {
      expect(parseActor(actorLabel(a))).toEqual(a);
    }));
  });
  it('is null for what no writer stores', () => {
    for (const s of [null, undefined, '', 'operator:', 'operator', 'Agent', ' agent', 'human', 'override_end', 'admin:root']) expect(parseActor(s), String(s)).toBeNull();
  });
  it('keeps the whole id after the prefix', () => {
    expect(parseActor('operator:a:b')).toEqual(operatorActor('a:b'));
  });
});
