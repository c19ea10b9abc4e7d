import { TITLE_MAX_BYTES as MAX_TITLE_BYTES } from '../lifecycle.ts';
import { flattenToOneLine } from '../neutralize.ts';
import type { SourceType } from '../webhook-source.ts';

type Json = Record<string, any>;

/** One line, no control characters, at most 200 bytes (cut on a character boundary). */
export function oneLine(text: string): string {
  let line = flattenToOneLine(text);
  if (Buffer.byteLength(line) <= MAX_TITLE_BYTES) return line;
  // Cut from a bounded prefix, one character at a time: the text can be megabytes (a generic
  // producer's `title`), and re-splitting all of it per character is quadratic.
  const chars = [...line.slice(0, MAX_TITLE_BYTES)];
  let bytes = Buffer.byteLength(chars.join(''));
  while (bytes + Buffer.byteLength('…') > MAX_TITLE_BYTES) bytes -= Buffer.byteLength(chars.pop()!);
  return `${chars.join('')}…`;
}

/**
 * A readable title for the common GitHub and Gitea events; `<event> on <repo>` otherwise. The raw
 * payload stays in the todo's payload: the title is only the doorbell's summary line.
 */
export function titleFor(source: SourceType, event: string | null, payload: unknown): string {
  const p = (payload && typeof payload === 'object' ? payload : {}) as Json;
  const repo: string | undefined = p.repository?.full_name;
  const where = repo ? ` in ${repo}` : '';
  const action: string | undefined = typeof p.action === 'string' ? p.action : undefined;
  if (source === 'generic') return oneLine(typeof p.title === 'string' && p.title ? p.title : `${event ?? 'webhook'} delivery`);
  switch (event) {
    case 'issues':
      if (p.issue) return oneLine(`Issue #${p.issue.number} ${action ?? 'updated'}${where}: ${p.issue.title ?? ''}`);
      break;
    case 'issue_comment':
      if (p.issue) return oneLine(`Comment on #${p.issue.number}${where} by ${p.comment?.user?.login ?? 'someone'}: ${p.issue.title ?? ''}`);
      break;
    case 'pull_request':
      if (p.pull_request) {
        const pr = p.pull_request;
        if (action === 'review_requested') {
          const who = p.requested_reviewer?.login ?? p.requested_team?.name;
          return oneLine(`Review requested${who ? ` from ${who}` : ''} on PR #${pr.number}${where}: ${pr.title ?? ''}`);
        }
        return oneLine(`PR #${pr.number} ${action ?? 'updated'}${where}: ${pr.title ?? ''}`);
      }
      break;
    case 'pull_request_review':
      if (p.pull_request) return oneLine(`Review ${p.review?.state ?? action ?? ''} on PR #${p.pull_request.number}${where}: ${p.pull_request.title ?? ''}`);
      break;
    case 'push': {
      const ref = typeof p.ref === 'string' ? p.ref.replace(/^refs\/heads\//, '') : 'a branch';
      const n = Array.isArray(p.commits) ? p.commits.length : 0;
      return oneLine(`Push to ${ref}${where} (${n} commit${n === 1 ? '' : 's'})`);
    }
    case 'release':
      if (p.release) return oneLine(`Release ${p.release.tag_name ?? p.release.name ?? ''} ${action ?? 'published'}${where}`);
      break;
    case 'workflow_run':
      if (p.workflow_run) {
        const run = p.workflow_run;
        const outcome = run.conclusion === 'failure' ? 'failed' : (run.conclusion ?? run.status ?? action ?? 'updated');
        return oneLine(`Workflow ${run.name ?? ''} ${outcome}${where}${run.head_branch ? ` on ${run.head_branch}` : ''}`);
      }
      break;
  }
  return oneLine(`${event ?? 'event'} on ${repo ?? source}`);
}
