import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Clock } from '../lib/clock.ts';
import { SwitchboardError } from '../domain/errors.ts';
import type { EndpointService } from '../services/endpoints.ts';
import type { TodoService } from '../services/todos.ts';
import type { OperatorPresence } from '../services/presence-operator.ts';
import type { PresenceHistory } from '../services/presence-history.ts';
import { humanGuard } from './auth.ts';
import type { Humans } from '../services/humans.ts';
import { registerMeRoutes } from './me.ts';
import { registerEndpointRoutes, type SessionCountView } from './endpoints.ts';
import { registerDoorbellTestRoutes } from './doorbell-tests.ts';
import { registerPresenceRoutes } from './presence.ts';
import type { SelfTests } from '../services/doorbell/self-tests.ts';
import type { Webhooks } from '../services/webhooks.ts';
import { registerWebhookRoutes } from './webhooks.ts';
import { registerHookRoutes } from './notify-hooks.ts';
import type { NotifyHooks } from '../services/notify-hooks.ts';
import { sendError } from '../web/errors.ts';
import type { AuthFailures } from '../web/auth-failures.ts';
import { RateLimiter } from '../lib/rate-limit.ts';
import { registerTodoRoutes } from './todos.ts';
import { registerGrantRoutes } from './grants.ts';
import { registerHistoryRoutes } from './history.ts';
import { registerOpenApi } from './openapi.ts';
import { VERSION } from '../lib/version.ts';
import type { WebhookRouting } from '../services/webhook-routing.ts';
import type { OAuthServer } from '../services/oauth.ts';
import type { HistoryService } from '../services/history.ts';

export interface ApiDeps {
  humans: Humans;
  clock: Clock;
  /** The public base URL; a function because a test server learns its port only after listening. */
  baseUrl: () => string;
  endpoints: EndpointService;
  todos: TodoService;
  operatorPresence: OperatorPresence;
  presenceHistory: PresenceHistory;
  selfTests: SelfTests;
  webhooks: Webhooks;
  webhookRouting: WebhookRouting;
  hooks: NotifyHooks;
  /** Per endpoint, its sessions across the cluster and how many are unheard. */
  sessionCounts?: (endpointIds: readonly string[]) => Promise<Map<string, SessionCountView>>;
  /** The per-address limit on failed authentications, shared with the board and /mcp. */
  authFailures: AuthFailures;
  /** OAuth: API-grant access tokens, the 401's resource_metadata, and endpoint grants' routes. */
  oauth: OAuthServer;
  /** Queue history (the charts' buckets). */
  history: HistoryService;
}

/** Per personal token: reads 20/s (burst 40), writes 5/s (burst 20). */
export const API_READ_LIMIT = { rate: 20, burst: 40 };
export const API_WRITE_LIMIT = { rate: 5, burst: 20 };
export const API_BODY_LIMIT = 64 * 1024;

export function registerApi(app: FastifyInstance, deps: ApiDeps): void {
  const { clock, endpoints } = deps;
  const base = deps.baseUrl;
  const readLimiter = new RateLimiter(API_READ_LIMIT, clock);
  const writeLimiter = new RateLimiter(API_WRITE_LIMIT, clock);

  registerOpenApi(app, { prefix: '/api/v1', version: VERSION, baseUrl: base });
  app.register(
    async (api) => {
      api.addHook('onRequest', humanGuard(deps.humans, deps.authFailures, deps.oauth));
      api.addHook('onRequest', async (req: FastifyRequest) => {
        const write = req.method !== 'GET' && req.method !== 'HEAD';
        const wait = (write ? writeLimiter : readLimiter).take(req.humanTokenId!);
        if (wait > 0) {
          throw new SwitchboardError('rate_limited', `too many ${write ? 'writes' : 'reads'} with this token; retry in ${wait} s`, {
            retry_after: wait,
          });
        }
      });

      // JSON in: without this, fastify's built-in text/plain parser hands a handler a string (a 400)
      // where every other non-JSON body gets 415.
      api.removeContentTypeParser('text/plain');
      // An unknown route under /api/v1 gets its 404 from this context, so the guard above runs first:
      // without a token it is the same 401 as any other route.
      api.setNotFoundHandler(async (_req, reply) => sendError(reply, new SwitchboardError('not_found', 'no such route')));

      const human = (req: FastifyRequest) => req.human!;

      registerMeRoutes(api);
      registerEndpointRoutes(api, { clock, baseUrl: base, endpoints, sessionCounts: deps.sessionCounts });
      registerTodoRoutes(api, { endpoints, todos: deps.todos, human });
      registerPresenceRoutes(api, { endpoints, operatorPresence: deps.operatorPresence, presenceHistory: deps.presenceHistory });
      registerDoorbellTestRoutes(api, { endpoints, selfTests: deps.selfTests });
      registerWebhookRoutes(api, { endpoints, webhooks: deps.webhooks, webhookRouting: deps.webhookRouting });
      registerHookRoutes(api, { endpoints, hooks: deps.hooks });
      registerGrantRoutes(api, { oauth: deps.oauth });
      registerHistoryRoutes(api, { endpoints, history: deps.history });
    },
    { prefix: '/api/v1' },
  );
}
