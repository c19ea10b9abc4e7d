import { actorLabel, type AuditActor } from '../domain/actor.ts';
import type { Logger } from './log.ts';

/** Everything an audit line is written for: who changed which credential or integration. */
export type AuditAction =
  | 'endpoint.vend'
  | 'endpoint.revoke'
  | 'webhook.create'
  | 'webhook.rotate'
  | 'webhook.delete'
  | 'webhook.rules'
  | 'notify_hook.create'
  | 'notify_hook.rotate'
  | 'notify_hook.delete'
  | 'token.create'
  | 'token.revoke'
  | 'board.sign_in'
  | 'board.sign_out'
  | 'oauth.grant'
  | 'oauth.revoke_grant';

/**
 * One audit line: `audit` names the action, `by` who did it (rendered by actorLabel:
 * `operator:<human id>`, `agent` for an endpoint's own MCP session, `admin:<os user>`), plus the
 * ids it touched. Never a secret: ids and slugs only.
 */
export function audit(log: Logger, action: AuditAction, by: AuditActor, fields: Record<string, string | number | boolean | null | readonly string[]>): void {
  log.info({ audit: action, by: actorLabel(by), ...fields }, `audit: ${action}`);
}
