import { DEFAULT_MAX_ATTEMPTS, MAX_ATTEMPTS_LIMIT, PRIORITY_MAX, PRIORITY_MIN } from '../../domain/lifecycle.ts';
import type { Endpoint } from '../../services/endpoints.ts';
import type { BoardSession } from '../auth.ts';
import { Html, html, path } from '../html.ts';
import { csrfField, fieldError, type FieldError } from './layout.ts';

/** The push form's fields as sent, kept across a refused send. */
export interface PushForm {
  error?: FieldError;
  title?: string;
  queue?: string;
  kind?: string;
  payload?: string;
  key?: string;
  delay?: string;
  priority?: string;
  max_attempts?: string;
}

/** Hand the endpoint a todo: the same input and rules as POST /api/v1/endpoints/{ref}/todos. */
export function pushSection(e: Endpoint, s: BoardSession, f: PushForm = {}): Html {
  const err = f.error;
  const invalid = (name: string) => (err?.field === name ? html` aria-invalid="true" aria-describedby="push-${name}-error"` : '');
  const error = (name: string) => fieldError(err, name, `push-${name}-error`);
  const text = (name: 'kind' | 'key' | 'delay' | 'priority' | 'max_attempts', label: string, placeholder: string, hint = '') =>
    html`<label>${label} <input type="text" name="${name}" value="${f[name] ?? ''}" placeholder="${placeholder}" autocomplete="off"${invalid(name)}></label>${
      hint ? html`<span class="hint">${hint}</span>` : ''
    }${error(name)}`;
  const queue = f.queue ?? e.scope_queues[0];
  return html`<section class="push" id="push">
<h2>Push a todo</h2>
<form class="push-form" method="post" action="${path('/endpoints', e.id, 'todos')}">
  ${csrfField(s)}
  <label>Title <input type="text" name="title" value="${f.title ?? ''}" maxlength="200" placeholder="Review PR 12" autocomplete="off"${invalid('title')}></label>
  ${error('title')}
  <label>Queue <select name="queue"${invalid('queue')}>${e.scope_queues.map((q) => html`<option value="${q}"${q === queue ? html` selected` : ''}>${q}</option>`)}</select></label>
  ${error('queue')}
  ${text('kind', 'Kind', 'operator')}
  <label class="block">Payload (JSON) <textarea name="payload" rows="4" placeholder='{"pr": 12}' spellcheck="false"${invalid('payload')}>${f.payload ?? ''}</textarea></label>
  ${error('payload')}
  ${text('key', 'Key', 'optional idempotency key', 'a repeat while the first todo is live returns it instead of a new one')}
  ${text('delay', 'Delay', 'optional: 90s, 10m, 1h30m', 'not claimable, nor rung, before then (at most 30 days)')}
  ${text('priority', 'Priority', '0', `a whole number from ${PRIORITY_MIN} to ${PRIORITY_MAX}; higher is claimed first`)}
  ${text('max_attempts', 'Max attempts', String(DEFAULT_MAX_ATTEMPTS), `claims before it is a dead letter (1 to ${MAX_ATTEMPTS_LIMIT})`)}
  ${error('form')}
  <button type="submit" class="primary">Push</button>
</form>
</section>`;
}
