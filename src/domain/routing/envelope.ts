// What a rule's `when` reads: a delivery as the server saw it, built here and nowhere else, plus
// convenience fields for forges (GitHub and Gitea payloads share these shapes), so a rule says
// `requested_reviewers.exists(r, r == params.bot)` instead of walking three payload shapes.
// Every field is present on every delivery (null or empty when the payload has none), so a rule
// about pull requests does not fault on a push.

/** The delivery facts the envelope is built from (live at ingest, or a stored event in a dry run). */
export interface DeliveryFacts {
  source: string;
  event: string | null;
  deliveryId: string | null;
  trustMode: string;
  verified: boolean;
  /** Sanitized headers (names lower-cased, secrets redacted). */
  headers: Record<string, string>;
  payload: unknown;
}

export interface Envelope extends Record<string, unknown> {
  source: string;
  event: string | null;
  action: string | null;
  delivery_id: string | null;
  trust_mode: string;
  verified: boolean;
  headers: Record<string, string>;
  payload: unknown;
  /** `owner/name`. */
  repository: string | null;
  /** The login of whoever caused the delivery. */
  sender: string | null;
  /** The issue or pull request number (a check's or workflow's first pull request). */
  number: number | null;
  /** Label names of the issue or pull request. */
  labels: string[];
  /** Assignee logins of the issue or pull request. */
  assignees: string[];
  /** Logins asked to review the pull request (with the one a review_requested delivery names). */
  requested_reviewers: string[];
  /** `owner/name#number`: what `once` keeps one live todo per. */
  subject: string | null;
  params: Record<string, unknown>;
}

type Json = Record<string, unknown>;
const obj = (v: unknown): Json | null => (v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Json) : null);
const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);
const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
const loginOf = (v: unknown): string | null => str(obj(v)?.login) ?? str(obj(v)?.username);
const logins = (v: unknown): string[] => list(v).map(loginOf).filter((l): l is string => l !== null);

function numberOf(p: Json): number | null {
  const direct = [obj(p.pull_request)?.number, obj(p.issue)?.number, p.number];
  for (const n of direct) if (typeof n === 'number' && Number.isSafeInteger(n)) return n;
  for (const holder of ['check_run', 'check_suite', 'workflow_run', 'workflow_job']) {
    const first = obj(list(obj(p[holder])?.pull_requests)[0]);
    if (typeof first?.number === 'number') return first.number;
  }
  return null;
}

/** `owner/name#number` of a forge payload's issue or pull request, or null: what `once` keys on. */
export function subjectOf(payload: unknown): string | null {
  const p = obj(payload) ?? {};
  const repository = str(obj(p.repository)?.full_name);
  const number = numberOf(p);
  return repository !== null && number !== null ? `${repository}#${number}` : null;
}

export function buildEnvelope(d: DeliveryFacts, params: Record<string, unknown>): Envelope {
  const p = obj(d.payload) ?? {};
  const item = obj(p.pull_request) ?? obj(p.issue);
  const repository = str(obj(p.repository)?.full_name);
  const number = numberOf(p);
  const reviewers = new Set(logins(obj(p.pull_request)?.requested_reviewers));
  // A review_request_removed delivery names the reviewer no longer asked: only a request adds one.
  const asked = p.action === 'review_requested' ? loginOf(p.requested_reviewer) : null;
  if (asked) reviewers.add(asked);
  if (p.action === 'review_request_removed') reviewers.delete(loginOf(p.requested_reviewer) ?? '');
  return {
    source: d.source,
    event: d.event,
    action: str(p.action),
    delivery_id: d.deliveryId,
    trust_mode: d.trustMode,
    verified: d.verified,
    headers: d.headers,
    payload: d.payload,
    repository,
    sender: loginOf(p.sender),
    number,
    labels: list(item?.labels)
      .map((l) => str(obj(l)?.name))
      .filter((n): n is string => n !== null),
    assignees: logins(item?.assignees),
    requested_reviewers: [...reviewers],
    subject: subjectOf(d.payload),
    params,
  };
}
