import type { BoardSession } from '../auth.ts';
import { html } from '../html.ts';
import { chips, csrfField, page } from './layout.ts';

/** What the consent page shows: who asks, where the answer goes, and what the grant reaches. */
export interface ConsentView {
  clientName: string;
  clientId: string;
  redirectHost: string;
  /** The request's parameters, carried by the form to the approval. */
  fields: Record<string, string>;
  grant: { kind: 'endpoint'; slug: string; agent: string; queues: string[]; verbs: string[] } | { kind: 'api' };
}

/**
 * The consent page (issue 38). The client names itself at registration, so the page says so; the
 * redirect host is the one fact the client cannot fake. The form is not boosted: its answer is a
 * redirect to the client, outside this origin.
 */
export function consentPage(s: BoardSession, v: ConsentView): string {
  const reach =
    v.grant.kind === 'api'
      ? html`<p><strong>It acts as you</strong> (${s.human.handle}) on the Switchboard API: everything you can do with the CLI, on every endpoint you own, until you revoke it.</p>`
      : html`<p>It connects as the agent of your endpoint <strong>${v.grant.slug}</strong> (${v.grant.agent}), like the endpoint's own credential:</p>
<dl class="facts"><dt>Queues</dt><dd>${chips(v.grant.queues)}</dd><dt>Verbs</dt><dd>${chips(v.grant.verbs)}</dd></dl>`;
  return page(
    { title: 'Authorize a client', session: s },
    html`<section class="message consent">
<h1>Authorize ${v.clientName}?</h1>
<p>An application calling itself <strong>${v.clientName}</strong> (unverified: any client can choose this name) asks for access.
Your answer goes back to <strong>${v.redirectHost}</strong>.</p>
${reach}
<p class="muted">Client id <code>${v.clientId}</code>. You can revoke the grant later on the endpoint's page or with <code>switchboard endpoint revoke-grant</code>.</p>
<form method="post" action="/oauth/authorize" hx-boost="false">
${csrfField(s)}
${Object.entries(v.fields).map(([k, val]) => html`<input type="hidden" name="${k}" value="${val}">`)}
<button type="submit" name="decision" value="approve" class="primary">Approve</button>
<button type="submit" name="decision" value="deny">Deny</button>
</form>
</section>`,
  );
}

/** An authorization request that cannot go back to its client (unknown client or redirect URI). */
export function consentRefusedPage(s: BoardSession, message: string): string {
  return page(
    { title: 'Authorization refused', session: s },
    html`<section class="message"><h1>This authorization request is refused</h1><p role="alert">${message}</p>
<p>Nothing was sent back to the application. Start the connection again from it.</p></section>`,
  );
}
