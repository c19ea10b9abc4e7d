import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migratedDatabase } from '../../../test/support/app.ts';
import { windowAt } from '../../domain/history.ts';
import { COUNT_COLUMNS } from './columns.ts';
import { foldHistoryDeltasUnscoped, humanQueueHistoryOf, pruneHistoryUnscoped, queueHistoryOf } from './index.ts';

// The sums per human (migration 0035): what the todos page charts for all of a human's endpoints.
// The triggers' rows are written here by hand, folded by the loop's own statement, and the sums
// are compared with sums the test makes of the rows it wrote.

let db: Awaited<ReturnType<typeof migratedDatabase>>;
const COUNTS = COUNT_COLUMNS;
type Change = { bucket: Date; endpoint: string; queue: string } & Partial<Record<(typeof COUNTS)[number], number>>;

let alice = '';
let bob = '';
const endpointsOf: Record<string, string[]> = {};
const written: Change[] = [];

async function human(handle: string, endpoints: number): Promise<string> {
  const [h] = await db.sql`insert into humans (handle) values (${handle}) returning id`;
  const [a] = await db.sql`insert into agents (owner_human_id, name) values (${h!.id}, ${handle}) returning id`;
  endpointsOf[h!.id as string] = [];
  for (let i = 0; i < endpoints; i++) {
    const [e] = await db.sql`
      insert into endpoints (agent_id, slug, credential_hash, credential_prefix, scope_queues)
      values (${a!.id}, ${`${handle}-${i}`}, ${`h-${handle}-${i}`}, 'p', '{work,reviews}') returning id`;
    endpointsOf[h!.id as string]!.push(e!.id as string);
  }
  return h!.id as string;
}

/** Appends changes as the todos' and rings' triggers would. */
async function record(changes: Change[]): Promise<void> {
  for (const c of changes) {
    await db.sql`
      insert into todo_history_delta (bucket, endpoint_id, queue, ${db.sql.unsafe(COUNTS.join(', '))})
      values (${c.bucket}, ${c.endpoint}, ${c.queue}, ${db.sql.unsafe(COUNTS.map((k) => String(c[k] ?? 0)).join(', '))})`;
    written.push(c);
  }
}

/** The test's own sums of what it wrote and folded, per human, width, bucket and queue. */
function expectedSums(before: Date): Map<string, Record<string, number>> {
  const owner = (endpoint: string) => Object.keys(endpointsOf).find((h) => endpointsOf[h]!.includes(endpoint))!;
  const out = new Map<string, Record<string, number>>();
  for (const c of written.filter((w) => w.bucket < before)) {
    const hour = new Date(Math.floor(c.bucket.getTime() / 3600_000) * 3600_000);
    for (const [width, bucket] of [['m', c.bucket], ['h', hour]] as const) {
      const key = `${owner(c.endpoint)} ${width} ${bucket.toISOString()} ${c.queue}`;
      const sums = out.get(key) ?? Object.fromEntries(COUNTS.map((k) => [k, 0]));
      for (const k of COUNTS) sums[k]! += c[k] ?? 0;
      out.set(key, sums);
    }
  }
  return out;
}

async function storedSums(): Promise<Map<string, Record<string, number>>> {
  const rows = await db.sql<Record<string, unknown>[]>`select * from todo_history_human`;
  return new Map(rows.map((r) => [`${r.human_id as string} ${r.width as string} ${(r.bucket as Date).toISOString()} ${r.queue as string}`, Object.fromEntries(COUNTS.map((k) => [k, r[k] as number]))]));
}

const t = (iso: string) => new Date(iso);

beforeAll(async () => {
  db = await migratedDatabase();
  alice = await human('alice', 3);
  bob = await human('bob', 1);
});
afterAll(async () => db?.drop());

describe('todo_history_human', () => {
  it("adds each folded bucket to its owner's sums, new buckets and buckets added to alike, and no other human's", async () => {
    const [a0, a1, a2] = endpointsOf[alice]!;
    const [b0] = endpointsOf[bob]!;
    await record([
      { bucket: t('2026-06-01T10:01:00Z'), endpoint: a0!, queue: 'work', created: 1, pending_change: 1 },
      { bucket: t('2026-06-01T10:01:00Z'), endpoint: a1!, queue: 'work', created: 1, pending_change: 1, rings_sent: 1 },
      { bucket: t('2026-06-01T10:01:00Z'), endpoint: a1!, queue: 'reviews', created: 1, pending_change: 1 },
      { bucket: t('2026-06-01T10:01:00Z'), endpoint: b0!, queue: 'work', created: 5, pending_change: 5 },
      { bucket: t('2026-06-01T10:02:00Z'), endpoint: a0!, queue: 'work', claimed: 1, pending_change: -1, claimed_change: 1, heard_claim: 1 },
    ]);
    await foldHistoryDeltasUnscoped(db.sql, t('2026-06-01T10:03:00Z'));
    expect(await storedSums()).toEqual(expectedSums(t('2026-06-01T10:03:00Z')));

    // A second fold adds to the hour buckets the first wrote (and to a minute a late row falls in).
    await record([
      { bucket: t('2026-06-01T10:02:00Z'), endpoint: a2!, queue: 'work', unheard: 1 },
      { bucket: t('2026-06-01T10:03:00Z'), endpoint: a0!, queue: 'work', completed: 1, claimed_change: -1 },
      { bucket: t('2026-06-01T10:03:00Z'), endpoint: a1!, queue: 'work', failed: 1, dead: 1, pending_change: -1 },
      { bucket: t('2026-06-01T10:03:00Z'), endpoint: b0!, queue: 'work', digests: 2 },
    ]);
    await foldHistoryDeltasUnscoped(db.sql, t('2026-06-01T10:04:00Z'));
    const stored = await storedSums();
    expect(stored).toEqual(expectedSums(t('2026-06-01T10:04:00Z')));
    expect(stored.get(`${alice} h 2026-06-01T10:00:00.000Z work`)).toMatchObject({ created: 2, claimed: 1, completed: 1, failed: 1, dead: 1, pending_change: 0, claimed_change: 0, unheard: 1 });
    expect(stored.get(`${bob} h 2026-06-01T10:00:00.000Z work`)).toMatchObject({ created: 5, digests: 2 });
  });

  it("answers the todos page's chart of all the human's endpoints as the endpoints' own buckets add up, the minute not folded yet included", async () => {
    await record([{ bucket: t('2026-06-01T10:04:00Z'), endpoint: endpointsOf[alice]![2]!, queue: 'reviews', created: 2, pending_change: 2 }]);
    for (const range of ['1h', '24h', '7d'] as const) {
      const w = windowAt(range, t('2026-06-01T10:04:30Z'));
      const summed = await humanQueueHistoryOf(db.sql, alice, w);
      const perEndpoint = await queueHistoryOf(db.sql, alice, endpointsOf[alice]!, w);
      expect(summed.rows.length, range).toBeGreaterThan(0);
      expect(summed, range).toEqual(perEndpoint);
    }
    const w = windowAt('1h', t('2026-06-01T10:04:30Z'));
    // reviews: one folded, two not yet; work came and went (its depth now is none).
    expect((await humanQueueHistoryOf(db.sql, alice, w)).now.map((n) => ({ queue: n.queue, pending: n.pending, claimed: n.claimed }))).toEqual([{ queue: 'reviews', pending: 3, claimed: 0 }]);
  });

  it('recounts the same sums from the endpoints\' buckets, and prunes them on the minutes\' and hours\' keeps', async () => {
    await foldHistoryDeltasUnscoped(db.sql, t('2026-06-01T10:05:00Z'));
    const before = await storedSums();
    await db.sql`select todo_history_human_recount()`;
    expect(await storedSums()).toEqual(before);

    await pruneHistoryUnscoped(db.sql, t('2026-06-03T10:10:00Z'), 1000);
    const kept = await storedSums();
    expect([...kept.keys()].every((k) => k.split(' ')[1] === 'h')).toBe(true);
    expect(kept.size).toBe([...before.keys()].filter((k) => k.split(' ')[1] === 'h').length);
    await pruneHistoryUnscoped(db.sql, t('2026-07-02T10:10:00Z'), 1000);
    expect((await storedSums()).size).toBe(0);
  });
});
