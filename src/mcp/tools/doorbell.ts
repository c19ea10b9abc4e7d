import { z } from 'zod';
import { TEST_WAIT_MAX_SECONDS, TEST_WAIT_MIN_SECONDS } from '../../services/doorbell/self-tests.ts';
import { defineTool, type Tool } from './tool.ts';

const WAIT_SECONDS_ERROR = `must be a whole number of seconds from ${TEST_WAIT_MIN_SECONDS} to ${TEST_WAIT_MAX_SECONDS}`;

/** The doorbell self verbs (SPEC-0025): acknowledge a ring, and run or read the self-test. */
export const doorbellSelfTools: Tool[] = [
  defineTool({
    name: 'ack_doorbell',
    annotations: { title: 'Acknowledge a doorbell', readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    description:
      "Acknowledge a doorbell you heard but will not act on now (pass its meta.ring_id). Claiming the doorbell's todo acknowledges it too, so call this only when you are not claiming.",
    input: z.object({ ring_id: z.string({ error: 'is required: the meta.ring_id of the doorbell' }).regex(/^rg_[0-9A-Z]{26}$/, 'must be a ring id like rg_<ULID>') }).strict(),
    async run(ctx, args) {
      return { ring_id: args.ring_id, state: await ctx.acks.ack(ctx.session, args.ring_id) };
    },
  }),
  defineTool({
    name: 'test_doorbell',
    annotations: { title: 'Test the doorbell', readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
    description:
      'Prove the doorbell loop end to end: creates a self-test todo and, about 2 s after this returns, rings it. End your turn; when the doorbell wakes you, claim that todo. Then read the verdict with get_doorbell_test. wait_seconds: 10-300, default 60.',
    input: z
      .object({
        wait_seconds: z
          .number({ error: WAIT_SECONDS_ERROR })
          .int(WAIT_SECONDS_ERROR)
          .min(TEST_WAIT_MIN_SECONDS, WAIT_SECONDS_ERROR)
          .max(TEST_WAIT_MAX_SECONDS, WAIT_SECONDS_ERROR)
          .optional(),
      })
      .strict(),
    async run(ctx, args) {
      return ctx.selfTests.start(ctx.session.endpoint, args.wait_seconds);
    },
  }),
  defineTool({
    name: 'get_doorbell_test',
    annotations: { title: 'Read a doorbell self-test', readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    description: 'The report of a self-test started with test_doorbell: delivery, claim timing, verdict and hints.',
    input: z.object({ test_id: z.string({ error: 'is required: the test_id test_doorbell returned' }).max(64) }).strict(),
    async run(ctx, args) {
      return ctx.selfTests.report(ctx.session.endpoint.id, args.test_id);
    },
  }),
];
