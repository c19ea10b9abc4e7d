import type { BoardSession } from '../auth.ts';
import { html, path, type Html } from '../html.ts';
import { ago, csrfField, time } from './layout.ts';

/** An OAuth grant as a card lists it: who holds it and when it was used; never a token. */
export interface GrantSummary {
  id: string;
  client_name: string;
  created_at: Date;
  last_used_at: Date | null;
}

/**
 * The endpoint's OAuth grants (clients that connected by URL alone), each with Revoke. The card
 * and the endpoint's page both show it; the form comes back to the page it was sent from.
 */
export function grantsFacts(endpointId: string, grants: readonly GrantSummary[], s: BoardSession, now: Date, home: 'list' | 'card'): Html {
  if (grants.length === 0) return html`<dt>OAuth grants</dt><dd class="grants"><span class="muted">none</span></dd>`;
  return html`<dt>OAuth grants</dt><dd class="grants"><ul class="grant-list">${grants.map(
    (g) => html`<li id="grant-${g.id}"><strong>${g.client_name}</strong> <span class="muted">granted ${time(g.created_at)}, used ${ago(g.last_used_at, now, 'never')}</span>
<form method="post" action="${path('/endpoints', endpointId, 'grants', g.id, 'revoke')}" class="inline">${csrfField(s)}<input type="hidden" name="return" value="${home}"><button type="submit">Revoke</button></form></li>`,
  )}</ul></dd>`;
}
