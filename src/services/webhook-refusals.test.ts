import { describe, expect, it } from 'vitest';
import { connect } from '../db/connect.ts';
import { ManualClock } from '../lib/clock.ts';
import { createLogger } from '../lib/log.ts';
import { startTestApp, vend, withApp } from '../../test/support/fixtures.ts';
import { WebhookRefusalTally } from './webhook-refusals.ts';
import type { ServiceBase } from './base.ts';

// The refusal tally (issue 39 item 3): refused deliveries counted in memory per webhook, minute and
// reason, written in one statement a flush; a webhook deleted meanwhile is skipped, and a flush
// that fails keeps its counts for the next.

const f = withApp();

async function webhook(name: string): Promise<string> {
  const e = await vend(f.api, { name, queues: ['reviews'] });
  const w = await f.api('POST', `/api/v1/endpoints/${e.slug}/webhooks`, { source_type: 'generic', target_queue: 'reviews' });
  return w.json.webhook_id as string;
}

const stored = async (webhookId: string) =>
  (await f.sql`select bucket, reason, n from webhook_refusals where webhook_id = ${webhookId} order by bucket, reason`).map((r) => ({ ...r }));

describe('WebhookRefusalTally', () => {
  it('adds up refusals per webhook, minute and reason, and writes them once a flush; a second flush adds to the same rows', async () => {
    const clock = new ManualClock('2026-06-01T10:00:05Z');
    const tally = new WebhookRefusalTally({ sql: f.sql, clock, log: createLogger('silent') });
    const a = await webhook('tally-a');
    const b = await webhook('tally-b');
    tally.count(a, 'unauthenticated');
    tally.count(a, 'unauthenticated');
    tally.count(a, 'invalid_argument');
    tally.count(b, 'rate_limited');
    clock.set(new Date('2026-06-01T10:01:00Z'));
    tally.count(a, 'unauthenticated');
    expect(await tally.flush()).toBe(4);
    expect(await tally.flush()).toBe(0);
    const ten = new Date('2026-06-01T10:00:00Z');
    const tenOne = new Date('2026-06-01T10:01:00Z');
    expect(await stored(a)).toEqual([
      { bucket: ten, reason: 'invalid_argument', n: 1 },
      { bucket: ten, reason: 'unauthenticated', n: 2 },
      { bucket: tenOne, reason: 'unauthenticated', n: 1 },
    ]);
    expect(await stored(b)).toEqual([{ bucket: ten, reason: 'rate_limited', n: 1 }]);
    tally.count(a, 'unauthenticated');
    await tally.flush();
    expect((await stored(a)).at(-1)).toEqual({ bucket: tenOne, reason: 'unauthenticated', n: 2 });
  });

  it('skips a webhook deleted since its refusals were counted, and writes the others', async () => {
    const tally = new WebhookRefusalTally({ sql: f.sql, clock: new ManualClock('2026-06-02T10:00:00Z'), log: createLogger('silent') });
    const gone = await webhook('tally-gone');
    const kept = await webhook('tally-kept');
    tally.count(gone, 'unauthenticated');
    tally.count(kept, 'unauthenticated');
    await f.sql`delete from webhooks where id = ${gone}`;
    expect(await tally.flush()).toBe(1);
    expect(await stored(kept)).toHaveLength(1);
    expect(await stored(gone)).toEqual([]);
  });

  it('an instance that stops writes the refusals it counted since its last flush', async () => {
    const w = await f.api('POST', `/api/v1/endpoints/${(await vend(f.api, { name: 'tally-stop', queues: ['reviews'] })).slug}/webhooks`, { source_type: 'generic', target_queue: 'reviews' });
    const other = await startTestApp(f.db.url, new ManualClock('2026-06-04T10:00:00Z'));
    const url = new URL(w.json.ingest_url);
    url.host = new URL(other.url).host;
    expect((await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: 'not json' })).status).toBe(400);
    expect(await stored(w.json.webhook_id)).toEqual([]);
    await other.stop();
    expect(await stored(w.json.webhook_id)).toEqual([{ bucket: new Date('2026-06-04T10:00:00Z'), reason: 'invalid_argument', n: 1 }]);
  });

  it('keeps the counts of a flush that failed, and writes them with the next', async () => {
    const closed = connect(f.db.url, { max: 1 });
    await closed.end();
    const base: ServiceBase = { sql: closed, clock: new ManualClock('2026-06-03T10:00:00Z'), log: createLogger('silent') };
    const tally = new WebhookRefusalTally(base);
    const w = await webhook('tally-retry');
    tally.count(w, 'invalid_argument');
    await expect(tally.flush()).rejects.toThrow();
    tally.count(w, 'invalid_argument');
    base.sql = f.sql;
    expect(await tally.flush()).toBe(1);
    expect(await stored(w)).toEqual([{ bucket: new Date('2026-06-03T10:00:00Z'), reason: 'invalid_argument', n: 2 }]);
  });
});
