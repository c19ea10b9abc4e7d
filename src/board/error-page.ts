import type { FastifyReply } from 'fastify';
import { retryAfterSeconds, type SwitchboardError } from '../domain/errors.ts';
import { HTTP_STATUS } from '../web/errors.ts';
import type { BoardSession } from './auth.ts';
import { html } from './html.ts';
import { messagePage } from './pages.ts';

/** The board's renderer of a classified error: the status from the code, a heading that names what to do. */
export function sendBoardError(reply: FastifyReply, e: SwitchboardError, s: BoardSession | undefined): FastifyReply {
  const wait = retryAfterSeconds(e);
  if (wait !== undefined) reply.header('retry-after', String(wait));
  if (e.code === 'not_found') return sendPage(reply, 404, notFoundPage(s));
  const heading = e.code === 'conflict' ? 'Not possible now' : e.code === 'internal' ? 'Something went wrong' : e.code === 'unavailable' ? 'Try again shortly' : 'Refused';
  return sendPage(reply, HTTP_STATUS[e.code], messagePage({ title: heading, session: s }, heading, e.message, backLink(s)));
}

export function sendPage(reply: FastifyReply, status: number, body: string): FastifyReply {
  if (!reply.hasHeader('cache-control')) reply.header('cache-control', 'no-store');
  return reply.code(status).type('text/html; charset=utf-8').send(body);
}

export function backLink(s: BoardSession | undefined) {
  return s ? html`<p><a href="/">Back to your endpoints</a></p>` : html`<p><a href="/login">Sign in</a></p>`;
}

export function notFoundPage(s: BoardSession | undefined): string {
  return messagePage({ title: 'Not found', session: s }, 'Not found', 'Nothing by that id belongs to you.', backLink(s));
}
