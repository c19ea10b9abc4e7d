import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { operatorActor } from '../../domain/actor.ts';
import { isSwitchboardError, type SwitchboardError } from '../../domain/errors.ts';
import type { Logger } from '../../lib/log.ts';
import { ownerOf, type Endpoint, type EndpointService } from '../../services/endpoints.ts';
import type { NotifyHooks } from '../../services/notify-hooks.ts';
import { WEBHOOKS_PER_ENDPOINT_MAX, type Webhooks } from '../../services/webhooks.ts';
import { HTTP_STATUS } from '../../web/errors.ts';
import type { BoardSession } from '../auth.ts';
import { sendPage } from '../error-page.ts';
import { field, fieldErrorOf, fields, formOf } from '../form.ts';
import { html, path } from '../html.ts';
import { confirmPage, mintedHookPage, mintedWebhookPage } from '../views/integrations.ts';
import type { EndpointPageOptions } from './endpoints.ts';

export interface IntegrationRouteDeps {
  log: Logger;
  endpoints: EndpointService;
  webhooks: Webhooks;
  hooks: NotifyHooks;
  renderEndpoint: (reply: FastifyReply, s: BoardSession, e: Endpoint, status: number, opts: EndpointPageOptions) => Promise<FastifyReply>;
}

const humanOf = (req: FastifyRequest): BoardSession => req.boardSession!;
const params = (req: FastifyRequest) => req.params as { id: string; wid: string; hid: string };

/** A create form's refusal the board shows under the form: bad input, or the endpoint's limit reached. */
const shownInline = (err: unknown): err is SwitchboardError =>
  isSwitchboardError(err) && (err.code === 'invalid_argument' || err.code === 'conflict' || err.code === 'resource_exhausted');

/**
 * Webhooks and notify hooks of one endpoint: create (the URL and secrets shown once, on the
 * answer), rotate and delete (each behind a confirm page). The same service calls as
 * /api/v1/endpoints/{ref}/webhooks and /hooks, with the same guards: creating needs an active
 * endpoint; another human's endpoint, or a webhook or notify hook of another endpoint, is a 404.
 */
export function registerIntegrationRoutes(board: FastifyInstance, deps: IntegrationRouteDeps): void {
  const own = (req: FastifyRequest) => deps.endpoints.requireOwn(humanOf(req).human.id, params(req).id);
  const active = (req: FastifyRequest) => deps.endpoints.requireOwnActive(humanOf(req).human.id, params(req).id);
  const webhookOf = async (req: FastifyRequest) => {
    const e = await own(req);
    return { e, w: await deps.webhooks.endpointWebhook(e.id, params(req).wid) };
  };
  const hookOf = async (req: FastifyRequest) => {
    const e = await own(req);
    return { e, h: await deps.hooks.endpointHook(e.id, params(req).hid) };
  };
  const by = (req: FastifyRequest) => operatorActor(humanOf(req).human.id);

  // ---------------------------------------------------------------------------------------------
  // Webhooks

  board.post('/endpoints/:id/webhooks', async (req, reply) => {
    const e = await active(req);
    const form = formOf(req);
    const input = { source_type: field(form, 'source_type') ?? '', target_queue: field(form, 'target_queue') };
    try {
      const created = await deps.webhooks.create(ownerOf(e), input, by(req), WEBHOOKS_PER_ENDPOINT_MAX);
      deps.log.info({ slug: e.slug, webhook_id: created.webhook_id, human_id: humanOf(req).human.id }, 'webhook created on the board');
      return sendPage(reply, 201, mintedWebhookPage(humanOf(req), e, created, 'created'));
    } catch (err) {
      if (!shownInline(err)) throw err;
      const error = err.code === 'invalid_argument' ? fieldErrorOf(err) : { field: 'form', message: err.message };
      return deps.renderEndpoint(reply, humanOf(req), e, HTTP_STATUS[err.code], { forms: { webhook: { error, ...input } } });
    }
  });

  board.get('/endpoints/:id/webhooks/:wid/rotate', async (req, reply) => {
    const { e, w } = await webhookOf(req);
    return sendPage(
      reply,
      200,
      confirmPage(humanOf(req), {
        title: `Rotate this ${w.source_type} webhook?`,
        text: html`Webhook into <code>${w.target_queue}</code> of <code>${e.slug}</code>: a new ingest URL${
          w.trust_mode === 'signed' ? ' and signing secret are' : ' is'
        } minted and shown once; the current ones stop working at once, so update the producer right after.`,
        action: path('/endpoints', e.id, 'webhooks', w.id, 'rotate'),
        button: 'Rotate',
        cancel: `${path('/endpoints', e.id)}#webhooks`,
      }),
    );
  });

  board.post('/endpoints/:id/webhooks/:wid/rotate', async (req, reply) => {
    const { e, w } = await webhookOf(req);
    const rotated = await deps.webhooks.rotate(w, by(req));
    deps.log.info({ slug: e.slug, webhook_id: w.id, human_id: humanOf(req).human.id }, 'webhook rotated on the board');
    return sendPage(reply, 200, mintedWebhookPage(humanOf(req), e, rotated, 'rotated'));
  });

  board.get('/endpoints/:id/webhooks/:wid/delete', async (req, reply) => {
    const { e, w } = await webhookOf(req);
    return sendPage(
      reply,
      200,
      confirmPage(humanOf(req), {
        title: `Delete this ${w.source_type} webhook?`,
        text: html`Webhook into <code>${w.target_queue}</code> of <code>${e.slug}</code>: its ingest URL stops working at once. Todos it made stay.`,
        action: path('/endpoints', e.id, 'webhooks', w.id, 'delete'),
        button: 'Delete webhook',
        cancel: `${path('/endpoints', e.id)}#webhooks`,
        danger: true,
      }),
    );
  });

  board.post('/endpoints/:id/webhooks/:wid/delete', async (req, reply) => {
    const { e, w } = await webhookOf(req);
    await deps.webhooks.delete(w, by(req));
    deps.log.info({ slug: e.slug, webhook_id: w.id, human_id: humanOf(req).human.id }, 'webhook deleted on the board');
    return reply.redirect(`${path('/endpoints', e.id)}#webhooks`, 303);
  });

  // ---------------------------------------------------------------------------------------------
  // Notify hooks

  board.post('/endpoints/:id/hooks', async (req, reply) => {
    const e = await active(req);
    const form = formOf(req);
    const url = field(form, 'url') ?? '';
    const queues = fields(form, 'queues');
    const ignorePresence = field(form, 'ignore_presence') === 'true';
    try {
      const created = await deps.hooks.create(ownerOf(e), { url: url.trim(), queues, ignore_presence: ignorePresence }, by(req));
      deps.log.info({ slug: e.slug, hook_id: created.hook_id, human_id: humanOf(req).human.id }, 'notify hook created on the board');
      return sendPage(reply, 201, mintedHookPage(humanOf(req), e, created, 'created'));
    } catch (err) {
      if (!shownInline(err)) throw err;
      const error = err.code === 'invalid_argument' ? fieldErrorOf(err) : { field: 'form', message: err.message };
      return deps.renderEndpoint(reply, humanOf(req), e, HTTP_STATUS[err.code], { forms: { hook: { error, url, queues, ignore_presence: ignorePresence } } });
    }
  });

  board.get('/endpoints/:id/hooks/:hid/rotate', async (req, reply) => {
    const { e, h } = await hookOf(req);
    return sendPage(
      reply,
      200,
      confirmPage(humanOf(req), {
        title: 'Rotate this notify hook’s secret?',
        text: html`Hook <code>${deps.hooks.view(h).url}</code> of <code>${e.slug}</code>: a new signing secret is minted and shown once; the current one keeps signing alongside it for 24 hours. A disabled hook is enabled again.`,
        action: path('/endpoints', e.id, 'hooks', h.id, 'rotate'),
        button: 'Rotate',
        cancel: `${path('/endpoints', e.id)}#notify-hooks`,
      }),
    );
  });

  board.post('/endpoints/:id/hooks/:hid/rotate', async (req, reply) => {
    const { e, h } = await hookOf(req);
    const rotated = await deps.hooks.rotate(h, by(req));
    deps.log.info({ slug: e.slug, hook_id: h.id, human_id: humanOf(req).human.id }, 'notify hook rotated on the board');
    return sendPage(reply, 200, mintedHookPage(humanOf(req), e, rotated, 'rotated'));
  });

  board.get('/endpoints/:id/hooks/:hid/delete', async (req, reply) => {
    const { e, h } = await hookOf(req);
    return sendPage(
      reply,
      200,
      confirmPage(humanOf(req), {
        title: 'Delete this notify hook?',
        text: html`Hook <code>${deps.hooks.view(h).url}</code> of <code>${e.slug}</code>: it is called no more, and calls waiting for it are dropped.`,
        action: path('/endpoints', e.id, 'hooks', h.id, 'delete'),
        button: 'Delete notify hook',
        cancel: `${path('/endpoints', e.id)}#notify-hooks`,
        danger: true,
      }),
    );
  });

  board.post('/endpoints/:id/hooks/:hid/delete', async (req, reply) => {
    const { e, h } = await hookOf(req);
    await deps.hooks.delete(h, by(req));
    deps.log.info({ slug: e.slug, hook_id: h.id, human_id: humanOf(req).human.id }, 'notify hook deleted on the board');
    return reply.redirect(`${path('/endpoints', e.id)}#notify-hooks`, 303);
  });
}
