import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { operatorActor } from '../../domain/actor.ts';
import type { SwitchboardError } from '../../domain/errors.ts';
import type { Logger } from '../../lib/log.ts';
import type { Endpoint, EndpointService } from '../../services/endpoints.ts';
import type { RoutingOwner, WebhookRouting } from '../../services/webhook-routing.ts';
import type { Webhooks } from '../../services/webhooks.ts';
import type { BoardSession } from '../auth.ts';
import { sendPage } from '../error-page.ts';
import { field, formOf, isInvalid } from '../form.ts';
import { rulesPage, rulesText, type RulesPageView } from '../views/routing.ts';
import type { HistoryService } from '../../services/history.ts';
import type { HistoryRange } from '../../domain/history.ts';
import { DEFAULT_RANGE, rangeOf } from './charts.ts';

export interface RoutingRouteDeps {
  log: Logger;
  endpoints: Pick<EndpointService, 'requireOwn' | 'requireOwnActive'>;
  webhooks: Pick<Webhooks, 'endpointWebhook'>;
  webhookRouting: Pick<WebhookRouting, 'view' | 'set' | 'test'>;
  /** The webhook's deliveries by outcome over time (the page's chart). */
  history: Pick<HistoryService, 'webhookDeliveries'>;
}

const humanOf = (req: FastifyRequest): BoardSession => req.boardSession!;
const params = (req: FastifyRequest) => req.params as { id: string; wid: string };
const ownerOf = (e: Endpoint): RoutingOwner => ({ id: e.id, slug: e.slug, queues: e.scope_queues, humanId: e.owner_human_id });

/** A position in a JSON.parse message as "line L, column C" of the text (1-based). */
function whereIn(text: string, message: string): string {
  const at = /position (\d+)/.exec(message);
  if (!at) return '';
  const before = text.slice(0, Number(at[1]));
  const line = before.split('\n').length;
  return ` (line ${line}, column ${before.length - before.lastIndexOf('\n')})`;
}

/** The textarea's text as a rules write; text that is not JSON is refused like a bad field. */
function parseText(text: string): { ok: true; input: unknown } | { ok: false; error: { field: string; message: string } } {
  try {
    return { ok: true, input: JSON.parse(text) };
  } catch (err) {
    const message = String((err as Error).message ?? err);
    return { ok: false, error: { field: 'rules', message: `not JSON: ${message}${whereIn(text, message)}` } };
  }
}

/** Which part of the text a refusal is about, in words: "rule 1 (reviews for the bot)", "the default action". */
function partOf(err: SwitchboardError, input: unknown): string | undefined {
  const f = typeof err.details.field === 'string' ? err.details.field : '';
  const rule = /^rules\.(\d+)(\.|$)/.exec(f);
  if (rule) {
    const i = Number(rule[1]);
    const rules = (input as { rules?: unknown })?.rules;
    const name = Array.isArray(rules) ? (rules[i] as { name?: unknown } | undefined)?.name : undefined;
    return `rule ${i}${typeof name === 'string' && name !== '' ? ` (${name})` : ''}`;
  }
  if (f.startsWith('default_action')) return 'the default action';
  return undefined;
}

/**
 * A webhook's routing rules on the board: one page with the rules write as JSON in a textarea,
 * **Save** (WebhookRouting.set, as PUT /api/v1/endpoints/{ref}/webhooks/{id}/rules) and **Try**
 * (WebhookRouting.test, saving nothing); both answer with the dry run over the latest deliveries.
 * Another human's endpoint, or a webhook of another endpoint, is a 404; a revoked endpoint's
 * rules are read-only (its page has no form, and a POST is refused with 409).
 */
export function registerRoutingRoutes(board: FastifyInstance, deps: RoutingRouteDeps): void {
  const webhookOf = async (req: FastifyRequest, active: boolean) => {
    const humanId = humanOf(req).human.id;
    const e = active ? await deps.endpoints.requireOwnActive(humanId, params(req).id) : await deps.endpoints.requireOwn(humanId, params(req).id);
    return { e, row: await deps.webhooks.endpointWebhook(e.id, params(req).wid) };
  };
  const send = async (reply: FastifyReply, req: FastifyRequest, status: number, v: RulesPageView, range: HistoryRange = DEFAULT_RANGE) => {
    const deliveries = { range, ...(await deps.history.webhookDeliveries(humanOf(req).human.id, v.webhook.webhook_id, range)) };
    return sendPage(reply, status, rulesPage(humanOf(req), { ...v, deliveries }));
  };

  board.get('/endpoints/:id/webhooks/:wid/rules', async (req, reply) => {
    const range = rangeOf(req.query);
    const { e, row } = await webhookOf(req, false);
    const view = deps.webhookRouting.view(row);
    const webhook = { webhook_id: row.id, source_type: row.source_type, target_queue: row.target_queue };
    return send(reply, req, 200, { endpoint: e, webhook, text: rulesText(view), live: true }, range);
  });

  const write = (how: 'set' | 'test') => async (req: FastifyRequest, reply: FastifyReply) => {
    const { e, row } = await webhookOf(req, true);
    const webhook = { webhook_id: row.id, source_type: row.source_type, target_queue: row.target_queue };
    const text = field(formOf(req), 'rules') ?? '';
    const parsed = parseText(text);
    if (!parsed.ok) return send(reply, req, 400, { endpoint: e, webhook, text, error: parsed.error });
    try {
      const by = operatorActor(humanOf(req).human.id);
      const answer = await deps.webhookRouting[how](ownerOf(e), row, parsed.input, by);
      if (how === 'set') deps.log.info({ slug: e.slug, webhook_id: row.id, human_id: humanOf(req).human.id, rules: answer.rules.length }, 'webhook rules saved on the board');
      // A save shows what is stored now; a try keeps the text as typed, since nothing was stored.
      return send(reply, req, 200, { endpoint: e, webhook, text: how === 'set' ? rulesText(answer) : text, dryRun: { rows: answer.dry_run, saved: how === 'set' } });
    } catch (err) {
      if (!isInvalid(err)) throw err;
      const field = typeof err.details.field === 'string' ? err.details.field : 'rules';
      return send(reply, req, 400, { endpoint: e, webhook, text, error: { field, message: err.message, rule: partOf(err, parsed.input) } });
    }
  };

  board.post('/endpoints/:id/webhooks/:wid/rules', write('set'));
  board.post('/endpoints/:id/webhooks/:wid/rules/test', write('test'));
}
