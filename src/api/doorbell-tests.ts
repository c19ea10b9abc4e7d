import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { doc } from './openapi.ts';
import type { SelfTests } from '../services/doorbell/self-tests.ts';
import { ownerOf, type Endpoint, type EndpointService } from '../services/endpoints.ts';
import { parseInput } from '../domain/validate.ts';
import { doorbellTestReportSchema, doorbellTestStartedSchema, type DoorbellTestReport, type DoorbellTestStarted } from './wire.ts';

export const DOORBELL_TEST_BODY_LIMIT = 4 * 1024;

const startBody = z.object({ wait_seconds: z.number({ error: 'must be a number of seconds' }).optional() }).strict();

/** The operator's self-test routes (SPEC-0025 REQ-10): 404 for anyone else's endpoint, 409 revoked. */
export function registerDoorbellTestRoutes(api: FastifyInstance, deps: { endpoints: EndpointService; selfTests: SelfTests }): void {
  const activeEndpoint = (req: FastifyRequest): Promise<Endpoint> =>
    deps.endpoints.requireOwnActive(req.human!.id, (req.params as { ref: string }).ref);

  api.post('/endpoints/:ref/doorbell-tests', { bodyLimit: DOORBELL_TEST_BODY_LIMIT, ...doc({ tag: 'doorbell tests', summary: 'Start a doorbell self-test: a test ring to one live session, which the agent must acknowledge', body: startBody, ok: { status: 201, description: 'The test id and when its verdict is due' }, response: doorbellTestStartedSchema, errors: [409] }) }, async (req, reply) => {
    const endpoint = await activeEndpoint(req);
    const body = parseInput(startBody, req.body ?? {});
    const started = await deps.selfTests.start(ownerOf(endpoint), body.wait_seconds);
    return reply.code(201).send(started satisfies DoorbellTestStarted);
  });

  api.get('/endpoints/:ref/doorbell-tests/:test_id', doc({ tag: 'doorbell tests', summary: 'A self-test\'s report: its verdict and what each step saw', ok: { status: 200, description: 'The report' }, response: doorbellTestReportSchema, errors: [409] }), async (req): Promise<DoorbellTestReport> => {
    const endpoint = await activeEndpoint(req);
    return deps.selfTests.report(endpoint.id, (req.params as { test_id: string }).test_id);
  });
}
