import type { PresenceChange, PresenceHistory } from '../api/wire.ts';
import { parseDuration } from '../domain/duration.ts';
import { parseRfc3339 } from '../domain/presence/until.ts';
import type { ApiClient } from './client.ts';
import { printJson, printTable, usageError, type Io } from './output.ts';

/**
 * `--since`: a strict RFC 3339 time, or a duration back from now (`48h`, the one duration
 * grammar). Sent to the API as RFC 3339; a refusal is a usage error (exit 2).
 */
export function sinceArg(raw: string | undefined, now: Date = new Date()): string | undefined {
  if (raw === undefined) return undefined;
  const text = raw.trim();
  const at = parseRfc3339(text);
  if (at) return at.toISOString();
  const back = parseDuration(text);
  if (back !== null) return new Date(now.getTime() - back).toISOString();
  throw usageError(`--since: ${JSON.stringify(raw)} is neither an RFC 3339 time nor a duration like 48h`);
}

/** Who made a change, as a person reads it: `operator:<handle>` when the human is known. */
export const changedBy = (c: Pick<PresenceChange, 'by' | 'by_handle'>): string => (c.by_handle ? `operator:${c.by_handle}` : c.by);

/** `switchboard endpoint presence REF --history`: the endpoint's presence changes, newest first (`--json` adds each reason). */
export async function showPresenceHistory(io: Io, api: ApiClient, ref: string, opts: { since?: string; limit?: string; json?: boolean }): Promise<void> {
  const query = new URLSearchParams();
  const since = sinceArg(opts.since);
  if (since) query.set('since', since);
  if (opts.limit !== undefined) query.set('limit', opts.limit);
  const q = query.size > 0 ? `?${query}` : '';
  const h = await api.get<PresenceHistory>(`/endpoints/${encodeURIComponent(ref)}/presence/history${q}`);
  if (opts.json) return printJson(io, h);
  if (h.changes.length === 0) return io.out(`No presence changes of ${ref} since ${h.since}.\n`);
  printTable(
    io,
    ['AT', 'FROM', 'TO', 'SOURCE', 'BY', 'UNTIL'],
    h.changes.map((c) => [c.at, c.from, c.to, c.source, changedBy(c), c.until]),
  );
}
