import { describe, expect, it } from 'vitest';
import { SwitchboardError } from './errors.ts';
import { scopedQueue } from './scope.ts';
import { resolvePushQueue } from './todo-input.ts';

const refusal = (f: () => unknown): SwitchboardError => {
  try {
    f();
  } catch (err) {
    if (err instanceof SwitchboardError) return err;
    throw err;
  }
  throw new Error('expected a refusal');
};

const one = { slug: 'bot-1', queues: ['inbox'] };
const two = { slug: 'bot-2', queues: ['inbox', 'reviews'] };

describe('scopedQueue: the queue must be one of the endpoint\'s queues', () => {
  it('takes a queue of the scope, and the only queue when none is asked', () => {
    expect(scopedQueue(two, 'queue', 'reviews', 'operator')).toBe('reviews');
    expect(scopedQueue(one, 'target_queue', undefined, 'agent')).toBe('inbox');
  });

  it('requires the field when the endpoint has several queues', () => {
    const e = refusal(() => scopedQueue(two, 'target_queue', undefined, 'agent'));
    expect({ code: e.code, message: e.message }).toEqual({ code: 'invalid_argument', message: 'target_queue: required, because endpoint bot-2 has several queues (inbox, reviews)' });
  });

  it("refuses a queue outside the scope: the agent's forbidden, the operator's invalid_argument, one message", () => {
    const agent = refusal(() => scopedQueue(two, 'queue', 'elsewhere', 'agent'));
    const operator = refusal(() => scopedQueue(two, 'queue', 'elsewhere', 'operator'));
    expect(agent.code).toBe('forbidden');
    expect(operator.code).toBe('invalid_argument');
    expect(operator.details).toMatchObject({ field: 'queue' });
    expect(agent.message).toBe(operator.message);
    expect(agent.message).toBe(`queue: "elsewhere" is not one of endpoint bot-2's queues (inbox, reviews)`);
    expect(refusal(() => scopedQueue(two, 'queue', 7, 'operator')).message).toBe('queue: must be a queue name');
  });

  it('is the rule a push follows', () => {
    const endpoint = { slug: 'bot-2', scope_queues: ['inbox', 'reviews'] };
    expect(refusal(() => resolvePushQueue(endpoint, 'elsewhere')).message).toBe(refusal(() => scopedQueue(two, 'queue', 'elsewhere', 'operator')).message);
  });
});
