import { z } from 'zod';
import { defineTool, type Tool } from './tool.ts';

/** The doorbell self verbs (SPEC-0025): acknowledge a ring, and run or read the self-test. */
export const doorbellSelfTools: Tool[] = [
  defineTool({
    name: 'ack_doorbell',
    description:
      "Acknowledge a doorbell you heard but will not act on now (pass its meta.ring_id). Claiming the doorbell's todo acknowledges it too, so call this only when you are not claiming.",
    input: z.object({ ring_id: z.string({ error: 'is required: the meta.ring_id of the doorbell' }).regex(/^rg_[0-9A-Z]{26}$/, 'must be a ring id like rg_<ULID>') }).strict(),
    async run(ctx, args) {
      return { ring_id: args.ring_id, state: await ctx.acks.ack(ctx.session, args.ring_id) };
    },
  }),
  defineTool({
    name: 'test_doorbell',
    description:
      'Prove the doorbell loop end to end: creates a self-test todo and, about 2 s after this returns, rings it. End your turn; when the doorbell wakes you, claim that todo. Then read the verdict with get_doorbell_test. wait_seconds: 10-300, default 60.',
    input: z.object({ wait_seconds: z.number({ error: 'must be a number of seconds' }).optional() }).strict(),
    async run(ctx, args) {
      return ctx.selfTests.start(ctx.session.endpoint, args.wait_seconds);
    },
  }),
  defineTool({
    name: 'get_doorbell_test',
    description: 'The report of a self-test started with test_doorbell: delivery, claim timing, verdict and hints.',
    input: z.object({ test_id: z.string({ error: 'is required: the test_id test_doorbell returned' }).max(64) }).strict(),
    async run(ctx, args) {
      return ctx.selfTests.report(ctx.session.endpoint.id, args.test_id);
    },
  }),
];
