import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migratedDatabase } from '../../test/support/app.ts';
import type { Sql } from '../db/connect.ts';
import { windowAt } from '../domain/history.ts';
import { foldHistoryDeltasUnscoped, historyOf, humanQueueHistoryOf, pendingDepthOf, pruneHistoryUnscoped, queueHistoryOf } from './history/index.ts';
import { insertRing, markUnheardRingsUnscoped } from './rings.ts';
import { countEndpointTodos } from './board.ts';
import { listOwnEndpointsPage } from './endpoints.ts';
import { deleteExpiredOAuthRowsUnscoped } from './oauth/index.ts';
import { deleteOldPresenceHistoryUnscoped } from './presence-history/index.ts';
import { deleteOldWebhookRefusalsUnscoped } from './webhook-refusals.ts';
import { deleteFinishedTodosUnscoped, deleteOldReplayKeysUnscoped, deleteOrphanEventsUnscoped, deleteTodolessEventsUnscoped } from './retention.ts';
import { presenceWatchlistUnscoped } from './presence.ts';
import { markUnheardSessionsUnscoped } from './sessions.ts';
import { chargeDueRingsUnscoped, claimNextTodo } from './todos/index.ts';
import { insertDeliveries } from './todos/insert.ts';
import { transitionHeldTodos } from './todos/transitions.ts';

/**
 * Query plans that must not depend on luck. Statistics taken while no todo was claimed make any
 * index that is partial on `state = 'claimed'` look free; a one-todo update by id must still go
 * through the primary key, whatever the planner thinks of the others, while the reaper's lease
 * scan keeps its own index.
 */

let db: Awaited<ReturnType<typeof migratedDatabase>>;
let endpointId = '';

beforeAll(async () => {
  db = await migratedDatabase();
  const sql = db.sql;
  const [h] = await sql`insert into humans (handle) values ('plans') returning id`;
  const [a] = await sql`insert into agents (owner_human_id, name) values (${h!.id}, 'a') returning id`;
  const [e] = await sql`
    insert into endpoints (agent_id, slug, credential_hash, credential_prefix, scope_queues, scope_verbs)
    values (${a!.id}, 'plans', 'h', 'p', '{q}', '{claim}') returning id`;
  endpointId = e!.id as string;
  await sql`
    insert into todos (id, endpoint_id, queue, title, state, created_at, updated_at)
    select 'td_' || gen_random_uuid(), ${endpointId}, 'q', 't', 'done', now(), now() from generate_series(1, 5000)`;
  await sql`analyze todos`;
  // Churn after the statistics: claims that came and went.
  await sql`update todos set state = 'claimed', owner = 'agent:x', lease_expires_at = now() where id in (select id from todos limit 2000)`;
  await sql`update todos set state = 'done', owner = null, lease_expires_at = null where state = 'claimed'`;
});
afterAll(async () => db?.drop());

let probes = 0;
type PlanNode = Record<string, unknown>;
/** Every node of a statement's plan, parents before their children. */
async function planNodes(statement: string, params: unknown[], generic: boolean): Promise<PlanNode[]> {
  return db.sql.begin(async (tx) => {
    await tx.unsafe(`set local plan_cache_mode = ${generic ? 'force_generic_plan' : 'force_custom_plan'}`);
    const name = `probe_${++probes}`;
    await tx.unsafe(`prepare ${name} as ${statement}`);
    const quote = (x: unknown) => `'${String(x).replace(/'/g, "''")}'`;
    const literal = params
      .map((p) =>
        p === null ? 'null'
        : Array.isArray(p) ? quote(`{${p.map((x) => `"${String(x).replace(/["\\]/g, '\\$&')}"`).join(',')}}`) // untyped: fits text[] and uuid[]
        : p instanceof Date ? quote(p.toISOString())
        : typeof p === 'object' ? quote(JSON.stringify(p))
        : quote(p),
      )
      .join(', ');
    const [row] = await tx.unsafe(`explain (format json) execute ${name}${params.length > 0 ? `(${literal})` : ''}`);
    await tx.unsafe(`deallocate ${name}`);
    const found: PlanNode[] = [];
    const walk = (node: PlanNode) => {
      found.push(node);
      for (const child of (node.Plans as PlanNode[] | undefined) ?? []) walk(child);
    };
    walk((row!['QUERY PLAN'] as { Plan: PlanNode }[])[0]!.Plan);
    return found;
  });
}
/** The scans of a statement's plan: each index it uses, and `seq:<table>` for each sequential scan. */
async function scansOf(statement: string, params: unknown[], generic: boolean): Promise<string[]> {
  return (await planNodes(statement, params, generic)).flatMap((node) =>
    typeof node['Index Name'] === 'string' ? [node['Index Name']]
    : node['Node Type'] === 'Seq Scan' ? [`seq:${node['Relation Name'] as string}`]
    : [],
  );
}
const indexesUsed = async (statement: string, params: unknown[], generic: boolean) =>
  (await scansOf(statement, params, generic)).filter((s) => !s.startsWith('seq:'));

/** The text and parameters of the (last `matching`) statement `run` sends, as the product's own code builds it. */
async function captured(run: (sql: Sql) => Promise<unknown>, matching = /./): Promise<{ text: string; params: unknown[] }> {
  let last = { text: '', params: [] as unknown[] };
  const spy = postgres(db.url, {
    max: 1,
    onnotice: () => {},
    debug: (_c, text, params) => void (matching.test(text) && (last = { text, params: [...params] })),
  });
  try {
    await spy`select 1`; // array types are fetched on a pool's first query
    await run(spy as unknown as Sql);
    return last;
  } finally {
    await spy.end();
  }
}

describe('todo plans', () => {
  for (const generic of [false, true]) {
    it(`a held-claim transition by id uses the primary key (${generic ? 'generic' : 'custom'} plan)`, async () => {
      const [{ id }] = (await db.sql`select id from todos limit 1`) as unknown as [{ id: string }];
      const caller = { endpointId, owner: 'agent:x', queues: ['q'] };
      // heartbeat/complete/fail/release's own statement (src/store/todos/transitions.ts), for one
      // call and for several going together: each row's todo found through the primary key.
      for (const calls of [1, 3]) {
        const { text, params } = await captured(
          (sql) => transitionHeldTodos(sql, caller, 'complete', Array.from({ length: calls }, (_, i) => ({ id: i === 0 ? id : `td_missing_${i}`, leaseTokenHash: null, now: new Date(), result: { ok: true } }))),
          /update todos set/,
        );
        expect(await indexesUsed(text, params, generic)).toEqual(['todos_pkey']);
      }
    });
  }

  it('the reaper finds expired leases through its own index', async () => {
    const used = await indexesUsed(`select id from todos where state = 'claimed' and lease_expires_at < $1::timestamptz`, [new Date().toISOString()], false);
    expect(used).toEqual(['todos_expired_lease_idx']);
  });
});

describe('delivery plans', () => {
  it('a delivery statement reads endpoints and webhooks through their primary keys (generic plan)', async () => {
    const sql = db.sql;
    await sql`
      insert into webhooks (endpoint_id, source_type, trust_mode, target_queue, ingest_token_hash, ingest_token_hint, signing_secret, created_by, created_at)
      select ${endpointId}, 'github', 'signed', 'q', 'hash-' || g, 'hint', 'plain:s', h.id, now() from generate_series(1, 3000) g, (select id from humans limit 1) h`;
    await sql`analyze webhooks`;
    const [w] = await sql`select id from webhooks limit 1`;
    const body = Buffer.from('{"probe":true}');
    const { text, params } = await captured(
      (sql) =>
        insertDeliveries(sql, [
          {
            event: { source: 'github', family: 'webhook', trustMode: 'signed', verified: true, payload: body, webhookId: w!.id as string, endpointId, replay: { bodySha256: Buffer.alloc(32, 1), since: new Date(0) } },
            todo: { endpointId, queue: 'q', title: 'probe' },
            now: new Date(),
          },
        ]),
      /insert into todos/,
    );
    const scans = await scansOf(text, params, true);
    expect(scans).toContain('endpoints_pkey');
    expect(scans).toContain('webhooks_pkey');
    expect(scans.filter((s) => s.startsWith('seq:') && s !== 'seq:instances')).toEqual([]);
  });
});

describe('claim_next plans', () => {
  let caller = { endpointId: '', owner: 'agent:x', queues: ['q'] };
  beforeAll(async () => {
    const [e] = await db.sql`
      insert into endpoints (agent_id, slug, credential_hash, credential_prefix, scope_queues, scope_verbs)
      select agent_id, 'deep', 'h2', 'p2', '{q}', '{claim}' from endpoints where id = ${endpointId} returning id`;
    caller = { ...caller, endpointId: e!.id as string };
    await db.sql`
      insert into todos (id, endpoint_id, queue, title, payload, created_at, updated_at)
      select 'td_' || gen_random_uuid(), ${caller.endpointId}, 'q', 'job ' || g, jsonb_build_object('n', g), now() + g * interval '1 microsecond', now()
      from generate_series(1, 20000) g`;
    // Statistics that know the queue is deep: the cheapest way to return all of it in order is not
    // the claim index (a generic plan without a limit per branch took todos_endpoint_updated_idx and sorted).
    await db.sql`analyze todos`;
  });

  for (const generic of [false, true]) {
    it(`walks todos_claim_scan_idx in order on a deep pending queue, not a scan and sort of it (${generic ? 'generic' : 'custom'} plan)`, async () => {
      const { text, params } = await captured((sql) => claimNextTodo(sql, caller, ['q'], 300, new Date()));
      const scans = await scansOf(text, params, generic);
      expect(scans).toContain('todos_claim_scan_idx');
      expect(scans).not.toContain('seq:todos');
    });
  }

  for (const generic of [false, true]) {
    it(`asks whether anything is claimable, after a claim that took nothing, through the claim's indexes, not a read of every todo (${generic ? 'generic' : 'custom'} plan)`, async () => {
      // An endpoint whose queue holds only finished todos, beside the deep one's 20,000 pending.
      const [e] = await db.sql`
        insert into endpoints (agent_id, slug, credential_hash, credential_prefix, scope_queues, scope_verbs)
        select agent_id, 'emptied-' || ${generic ? 'g' : 'c'}, 'h-' || ${generic ? 'g' : 'c'}, 'p', '{q}', '{claim}' from endpoints where id = ${endpointId} returning id`;
      await db.sql`
        insert into todos (id, endpoint_id, queue, title, state, created_at, updated_at)
        select 'td_' || gen_random_uuid(), ${e!.id}, 'q', 't', 'done', now(), now() from generate_series(1, 3000)`;
      await db.sql`analyze todos`;
      const empty = { endpointId: e!.id as string, owner: 'agent:x', queues: ['q'] };
      const { text, params } = await captured((sql) => claimNextTodo(sql, empty, ['q'], 300, new Date()), /exists \(\s*select 1 from todos|select \(select true from todos/);
      expect(text, 'the look-again ran').not.toBe('');
      const scans = await scansOf(text, params, generic);
      expect(scans, scans.join(', ')).not.toContain('seq:todos');
      // Pending todos through the claim's own index (the other ways go as the claim's branches do).
      expect(scans).toContain('todos_claim_scan_idx');
    });
  }

  for (const generic of [false, true]) {
    it(`stamps a claimed self-test's report without reading a week of reports; claim_next no longer looks for a ringing one (SPEC-0025 REQ-9) (${generic ? 'generic' : 'custom'} plan)`, async () => {
      await db.sql`
        insert into doorbell_tests (test_id, endpoint_id, todo_id, wait_seconds, created_at, ring_due_at, expires_at,
                                    server_version, stream_attached, channel_capability, delivery, delivered_at, claimed_at)
        select 'dt_' || lpad(g::text, 26, '0'), ${caller.endpointId}, 'td_' || gen_random_uuid(), 60, now(), now(), now(),
               'v', true, '{}', 'written', now(), now()
        from generate_series(1, 3000) g
        on conflict do nothing`;
      await db.sql`analyze doorbell_tests`;
      const { text, params } = await captured((sql) => claimNextTodo(sql, caller, ['q'], 300, new Date()));
      const scans = await scansOf(text, params, generic);
      expect(scans.filter((s) => s === 'doorbell_tests_unclaimed_idx')).toHaveLength(1);
      expect(scans).not.toContain('seq:doorbell_tests');
    });
  }
});

describe('claim acknowledgement plans', () => {
  let caller = { endpointId: '', owner: 'agent:x', queues: ['q'] };
  beforeAll(async () => {
    const [deaf, claimer] = await db.sql<{ id: string }[]>`
      insert into endpoints (agent_id, slug, credential_hash, credential_prefix, scope_queues, scope_verbs)
      select agent_id, s, 'ha-' || s, 'p', '{q}', '{claim}' from endpoints, unnest(array['deaf', 'acker']) s
      where id = ${endpointId} returning id`;
    caller = { ...caller, endpointId: claimer!.id };
    await db.sql`
      insert into todos (id, endpoint_id, queue, title, created_at, updated_at)
      select 'td_' || gen_random_uuid(), ${claimer!.id}, 'q', 'job', now(), now() from generate_series(1, 50)`;
    // Another endpoint's session never hears: its rings stay open (unheard rings can still be acknowledged).
    await db.sql`
      insert into doorbell_rings (ring_id, endpoint_id, session_id, todo_id, kind, window_seconds, sent_at, unheard_at)
      select 'rg_' || lpad(g::text, 26, '0'), ${deaf!.id}, 'deaf', 'td_' || g, 'todo', 900, now() - interval '1 hour', now()
      from generate_series(1, 5000) g`;
    await db.sql`analyze doorbell_rings`;
  });

  for (const generic of [false, true]) {
    it(`finds the claimed todo's open rings and the endpoint's digests through their indexes, not a read of every open ring (${generic ? 'generic' : 'custom'} plan)`, async () => {
      const { text, params } = await captured((sql) => claimNextTodo(sql, caller, ['q'], 300, new Date()));
      const rings = (await planNodes(text, params, generic)).filter((n) => n['Relation Name'] === 'doorbell_rings' && n['Node Type'] !== 'ModifyTable');
      const probes = (index: string) => rings.filter((n) => n['Index Name'] === index && /endpoint_id = /.test(String(n['Index Cond'])));
      expect(probes('doorbell_rings_open_todo_idx')).toHaveLength(1);
      expect(String(probes('doorbell_rings_open_todo_idx')[0]!['Index Cond'])).toMatch(/todo_id = /);
      expect(probes('doorbell_rings_open_digest_idx')).toHaveLength(1);
      // Every other read of the table is by ring id; none reads the open rings at large.
      expect(rings.filter((n) => !probes(String(n['Index Name'])).includes(n)).map((n) => n['Index Name'] ?? n['Node Type'])).toEqual(['doorbell_rings_pkey']);
    });
  }
});

describe('heartbeat sweep plans', () => {
  const receivers: string[] = [];
  beforeAll(async () => {
    // Receivers among many endpoints, each todo with its own event, as pushes make them.
    const endpoints = await db.sql<{ id: string }[]>`
      insert into endpoints (agent_id, slug, credential_hash, credential_prefix, scope_queues, scope_verbs)
      select agent_id, 'sweep-' || g, 'hs' || g, 'p', '{q}', '{claim}' from endpoints, generate_series(1, 200) g
      where id = ${endpointId} returning id`;
    receivers.push(...endpoints.slice(0, 5).map((e) => e.id));
    await db.sql`
      with ev as (
        insert into events (source, family, trust_mode, verified, endpoint_id)
        select 'operator', 'operator', 'operator', true, e.id from unnest(${endpoints.map((e) => e.id)}::uuid[]) e(id), generate_series(1, 20)
        returning id, endpoint_id
      )
      insert into todos (id, endpoint_id, queue, title, event_id, created_at, updated_at)
      select 'td_' || gen_random_uuid(), endpoint_id, 'q', 'ring me', id, now() - interval '1 hour', now() - interval '1 hour' from ev`;
    await db.sql`analyze`;
  });

  for (const generic of [false, true]) {
    it(`finds its receivers' pending todos through an index, not a scan of the table (${generic ? 'generic' : 'custom'} plan)`, async () => {
      // The pick (the first of the sweep's two statements): what todos_sweep_idx was once for.
      const { text, params } = await captured((sql) => chargeDueRingsUnscoped(sql, receivers, new Date()), /row_number\(\)/);
      const scans = await scansOf(text, params, generic);
      expect(scans, scans.join(', ')).not.toContain('seq:todos');
      expect(scans.some((s) => s.startsWith('todos_')), scans.join(', ')).toBe(true);
    });
  }
});

describe('unheard session sweep plans', () => {
  beforeAll(async () => {
    // Twenty live sessions, each rung 500 times in the week the records are kept.
    await db.sql`
      insert into mcp_sessions (id, endpoint_id, protocol_version, client_name, client_version, created_at, last_seen_at)
      select 'ms_' || g, ${endpointId}, '2025-11-25', 'c', '1', now(), now() from generate_series(1, 20) g`;
    await db.sql`
      insert into doorbell_rings (ring_id, endpoint_id, session_id, todo_id, kind, window_seconds, sent_at, acked_at, ack_via)
      select 'rg_' || lpad((100000 + s * 1000 + g)::text, 26, '0'), ${endpointId}, 'ms_' || s, 'td_' || g, 'todo', 900,
             now() - g * interval '1 minute', now(), 'claim'
      from generate_series(1, 20) s, generate_series(1, 500) g`;
    await db.sql`analyze`;
  });

  for (const generic of [false, true]) {
    it(`reads each live session's last three rings through doorbell_rings_session_idx, not every ring kept (${generic ? 'generic' : 'custom'} plan)`, async () => {
      const { text, params } = await captured((sql) => markUnheardSessionsUnscoped(sql), /mcp_sessions/);
      const nodes = await planNodes(text, params, generic);
      const lastRings = nodes.filter((n) => n['Index Name'] === 'doorbell_rings_session_idx' && /session_id = /.test(String(n['Index Cond'])));
      expect(lastRings).toHaveLength(1);
      expect(nodes.some((n) => n['Node Type'] === 'WindowAgg')).toBe(false);
    });
  }
});

describe('history plans', () => {
  // Forty endpoints with a day of minute buckets and a week of hours, and unfolded deltas: one
  // endpoint's chart must read its own rows through the primary key, not every endpoint's day
  // (at 10,000 endpoints a scan of the table is seconds: bench/history.ts).
  let humanId = '';
  let mine = '';
  const now = new Date('2026-06-01T12:00:30Z');
  beforeAll(async () => {
    const [owner] = await db.sql`select a.owner_human_id as id, e.agent_id from endpoints e join agents a on a.id = e.agent_id where e.id = ${endpointId}`;
    humanId = owner!.id as string;
    const made = await db.sql`
      insert into endpoints (agent_id, slug, credential_hash, credential_prefix, scope_queues)
      select ${owner!.agent_id}, 'history-' || g, 'hh' || g, 'p', '{work,reviews}' from generate_series(1, 40) g returning id`;
    mine = made[0]!.id as string;
    await db.sql`
      insert into todo_history (width, bucket, endpoint_id, queue, created, claimed, completed, pending_change, claimed_change, wait_hist)
      select 'm', ${now}::timestamptz - m * interval '1 minute', e.id, q, 1, 1, 1, m % 7, 0, array_fill(1, array[48])
      from endpoints e, generate_series(1, 1440) m, unnest(array['work', 'reviews']) q where e.slug like 'history-%'`;
    await db.sql`
      insert into todo_history (width, bucket, endpoint_id, queue, created, pending_change, claimed_change)
      select 'h', date_trunc('hour', ${now}::timestamptz) - h * interval '1 hour', e.id, 'work', 60, 3, 0
      from endpoints e, generate_series(0, 167) h where e.slug like 'history-%'`;
    await db.sql`
      insert into todo_history_delta (bucket, endpoint_id, queue, created)
      select date_trunc('minute', ${now}::timestamptz), e.id, 'work', 1 from endpoints e, generate_series(1, 50) where e.slug like 'history-%'`;
    // Forty other humans' sums of a day: the chart of one human must not read them all.
    await db.sql`
      with others as (insert into humans (handle) select 'history-owner-' || g from generate_series(1, 40) g returning id)
      insert into todo_history_human (width, bucket, human_id, queue, created, pending_change)
      select 'm', ${now}::timestamptz - m * interval '1 minute', o.id, q, 1, m % 3 - 1
      from others o, generate_series(1, 1440) m, unnest(array['work', 'reviews']) q`;
    await db.sql`analyze todo_history`;
    await db.sql`analyze todo_history_delta`;
    await db.sql`analyze todo_history_human`;
  });

  for (const generic of [false, true]) {
    it(`the todos page's chart of all the human's endpoints (humanQueueHistoryOf, 24 h) reads the human's sums through todo_history_human_pkey and no endpoint's buckets (${generic ? 'generic' : 'custom'} plan)`, async () => {
      const { text, params } = await captured((sql) => humanQueueHistoryOf(sql, humanId, windowAt('24h', now)), /todo_history/);
      const scans = await scansOf(text, params, generic);
      expect(scans, scans.join(', ')).toContain('todo_history_human_pkey');
      expect(scans.filter((x) => /todo_history($|_pkey|_bucket)/.test(x)), scans.join(', ')).toEqual([]);
      expect(scans, scans.join(', ')).not.toContain('seq:todo_history_human');
    });
  }

  const reads: [string, (sql: Sql) => Promise<unknown>][] = [
    ['an endpoint page\'s history (historyOf, 24 h)', (sql) => historyOf(sql, humanId, [mine], windowAt('24h', now))],
    ['a card\'s sparkline (pendingDepthOf)', (sql) => pendingDepthOf(sql, humanId, [mine], windowAt('24h', now))],
    ['the todos page\'s chart of one endpoint (queueHistoryOf, 7 d)', (sql) => queueHistoryOf(sql, humanId, [mine], windowAt('7d', now))],
  ];
  for (const [what, read] of reads) {
    for (const generic of [false, true]) {
      it(`${what} reads the endpoint's buckets through todo_history_pkey, not a scan of every endpoint's (${generic ? 'generic' : 'custom'} plan)`, async () => {
        const { text, params } = await captured(read, /todo_history/);
        const scans = await scansOf(text, params, generic);
        expect(scans, scans.join(', ')).toContain('todo_history_pkey');
        expect(scans, scans.join(', ')).not.toContain('seq:todo_history');
        expect(scans, scans.join(', ')).not.toContain('seq:todo_history_delta');
      });
    }
  }
});

// Issue 40 item 3: the background loops at 100,000 endpoints and 1,000,000 pending todos. Each
// loop's statements keep the plan `npm run bench:loops` (bench/loops.ts) measured at that size;
// the figures quoted are its medians there (docs/performance.md, "The loops at 100,000 endpoints").

/** Every statement `run` sends that matches, in order (captured() keeps the last). */
async function capturedAll(run: (sql: Sql) => Promise<unknown>, matching: RegExp): Promise<{ text: string; params: unknown[] }[]> {
  const all: { text: string; params: unknown[] }[] = [];
  const spy = postgres(db.url, {
    max: 1,
    onnotice: () => {},
    // As the product's connections (src/db/connect.ts): a statement that runs for its capture is not JIT-compiled first.
    connection: { jit: 'off' },
    debug: (_c, text, params) => void (matching.test(text) && all.push({ text, params: [...params] })),
  });
  try {
    await spy`select 1`;
    await run(spy as unknown as Sql);
    return all;
  } finally {
    await spy.end();
  }
}

describe('the loops at scale (issue 40)', () => {
  // A small fixture with the shape of bench:loops' (statistics taken on it): 300 endpoints of one
  // human among 3,000 of 500 others, 30,000 todos on them each with its own event, most pending,
  // one endpoint deep; enough rows that a scan is not free.
  const now = new Date('2026-06-01T12:00:00Z');
  const loopEndpoints: string[] = [];
  beforeAll(async () => {
    const [owner] = await db.sql`select agent_id from endpoints where id = ${endpointId}`;
    const made = await db.sql<{ id: string }[]>`
      insert into endpoints (agent_id, slug, credential_hash, credential_prefix, scope_queues)
      select ${owner!.agent_id}, 'loops-' || g, 'lp' || g, 'p', '{work,review}' from generate_series(1, 300) g returning id`;
    loopEndpoints.push(...made.map((e) => e.id));
    // 500 other humans' 3,000 endpoints around them.
    await db.sql`
      with crowd as (insert into humans (handle) select 'plans-crowd-' || g from generate_series(1, 500) g returning id),
      agents as (insert into agents (owner_human_id, name) select c.id, 'c' || g from crowd c, generate_series(1, 6) g returning id)
      insert into endpoints (agent_id, slug, credential_hash, credential_prefix, scope_queues)
      select id, 'crowd-' || id, 'cr' || id, 'p', '{work}' from agents`;
    await db.sql`
      with ev as (
        insert into events (source, family, trust_mode, verified, endpoint_id, received_at)
        select 'operator', 'operator', 'operator', true, case when g % 3 = 0 then ${loopEndpoints[0]!}::uuid else (${loopEndpoints}::uuid[])[1 + g % 300] end,
               ${now}::timestamptz - (g % 40000) * interval '1 minute'
        from generate_series(1, 30000) g
        returning id, endpoint_id, received_at
      )
      insert into todos (id, endpoint_id, queue, title, event_id, state, owner, lease_expires_at, claimed_at, completed_at, created_at, updated_at)
      select 'td_' || gen_random_uuid(), endpoint_id, case when id % 7 = 0 then 'review' else 'work' end, 't', id,
             case when id % 10 = 0 then 'done' when id % 10 = 1 then 'claimed' else 'pending' end,
             case when id % 10 in (0, 1) then 'agent:x' end, case when id % 10 = 1 then ${now}::timestamptz + interval '5 minutes' end,
             case when id % 10 in (0, 1) then received_at + interval '1 minute' end, case when id % 10 = 0 then received_at + interval '2 minutes' end,
             received_at, received_at + case when id % 10 in (0, 1) then interval '2 minutes' else interval '0' end
      from ev`;
    await db.sql`analyze`;
  });

describe('unheard ring sweep plans', () => {
  // Open rings past their window, todo rings and digests, among the todos above: each ring's
  // timely claim is looked up by its todo's primary key or its endpoint's recently updated todos.
  // A CASE over the ring's kind hid both from the planner, which read every todo once per ring
  // (3 minutes a pass for 1,000 due rings among 1.5 M todos; a ring's record 330 ms).
  beforeAll(async () => {
    await db.sql`
      insert into doorbell_rings (ring_id, endpoint_id, session_id, todo_id, kind, window_seconds, sent_at)
      select 'rg_' || lpad((900000 + g)::text, 26, '0'), (${loopEndpoints}::uuid[])[1 + g % 300], 'ms_open', case when g % 5 = 0 then null else 'td_' || g end,
             case when g % 5 = 0 then 'digest' else 'todo' end, 900, ${now}::timestamptz - (g % 1800) * interval '1 second'
      from generate_series(1, 2000) g`;
    // And the week of rings kept beside them, heard long ago by the sessions they were sent to.
    await db.sql`
      insert into mcp_sessions (id, endpoint_id, protocol_version, client_name, client_version, created_at, last_seen_at)
      select 'ms_loop_' || g, (${loopEndpoints}::uuid[])[g], '2025-11-25', 'c', '1', ${now}, ${now} from generate_series(1, 300) g`;
    await db.sql`
      insert into doorbell_rings (ring_id, endpoint_id, session_id, todo_id, kind, window_seconds, sent_at, acked_at, ack_via, acked_session_id)
      select 'rg_' || lpad((800000 + g)::text, 26, '0'), (${loopEndpoints}::uuid[])[1 + g % 300], 'ms_loop_' || (1 + g % 300), 'td_' || g, 'todo', 900,
             ${now}::timestamptz - interval '1 hour' - g * interval '20 seconds', ${now}::timestamptz - interval '1 hour' - g * interval '20 seconds',
             'claim', 'ms_loop_' || (1 + g % 300)
      from generate_series(1, 30000) g`;
    await db.sql`analyze doorbell_rings`;
  });

  for (const generic of [false, true]) {
    it(`finds each due ring's claim through todos_pkey or todos_endpoint_updated_idx, never a scan of todos (${generic ? 'generic' : 'custom'} plan)`, async () => {
      const statements = await capturedAll((sql) => markUnheardRingsUnscoped(sql, now), /update doorbell_rings/);
      expect(statements).toHaveLength(2);
      for (const { text, params } of statements) {
        const scans = await scansOf(text, params, generic);
        expect(scans, scans.join(', ')).toContain('doorbell_rings_unheard_sweep_idx');
        expect(scans, scans.join(', ')).toContain('todos_pkey');
        expect(scans, scans.join(', ')).toContain('todos_endpoint_updated_idx');
        expect(scans.filter((s) => s.startsWith('seq:')), scans.join(', ')).toEqual([]);
      }
    });

    it(`marks sessions unheard looking up each one's acknowledgements through doorbell_rings_acked_session_idx, not every ring kept (${generic ? 'generic' : 'custom'} plan)`, async () => {
      // 577 ms of a pass at 20,000 sessions and 1,000,000 rings kept when it read them all; 191 ms.
      const { text, params } = await captured((sql) => markUnheardSessionsUnscoped(sql), /mcp_sessions/);
      const scans = await scansOf(text, params, generic);
      expect(scans, scans.join(', ')).toContain('doorbell_rings_acked_session_idx');
      expect(scans, scans.join(', ')).not.toContain('seq:doorbell_rings');
    });

    it(`records a ring (its timely claim looked up) through an index, never a scan of todos (${generic ? 'generic' : 'custom'} plan)`, async () => {
      for (const kind of ['todo', 'digest'] as const) {
        const ringId = `rg_${'8'.repeat(24)}${generic ? 1 : 0}${kind === 'todo' ? 1 : 2}`;
        const ring = { ringId, endpointId, sessionId: 'ms_x', todoId: kind === 'todo' ? 'td_x' : null, kind, queue: null, synthetic: false, windowSeconds: 900, sentAt: now };
        const { text, params } = await captured((sql) => insertRing(sql, ring), /insert into doorbell_rings/);
        const scans = await scansOf(text, params, generic);
        expect(scans.filter((s) => s.startsWith('seq:todos')), scans.join(', ')).toEqual([]);
        expect(scans, scans.join(', ')).toContain(kind === 'todo' ? 'todos_pkey' : 'todos_endpoint_updated_idx');
      }
    });
  }
});

  describe('heartbeat sweep pick', () => {
    // 733 ms at 20,000 receivers over 1,000,000 pending todos when it ranked every due todo of
    // every receiver (a scan of todos and events); 123 ms walking each receiver's ring order.
    for (const generic of [false, true]) {
      it(`walks each receiver's todos in ring order through todos_ring_due_idx, stopping at its first due ones (${generic ? 'generic' : 'custom'} plan)`, async () => {
        const { text, params } = await captured((sql) => chargeDueRingsUnscoped(sql, loopEndpoints, now), /row_number\(\)/);
        const nodes = await planNodes(text, params, generic);
        const walk = nodes.filter((n) => n['Index Name'] === 'todos_ring_due_idx');
        expect(walk, JSON.stringify(nodes.map((n) => n['Index Name'] ?? n['Node Type']))).toHaveLength(1);
        expect(String(walk[0]!['Index Cond'])).toMatch(/endpoint_id = e\.id/);
        // Receivers are most of this fixture's endpoints, so reading endpoints whole is fair here
        // (at 20,000 of 100,000 it is endpoints_pkey); todos and events never.
        const scans = await scansOf(text, params, generic);
        expect(scans.filter((x) => x === 'seq:todos' || x === 'seq:events'), scans.join(', ')).toEqual([]);
      });
    }
  });

  describe('retention', () => {
    // 26 s a pass at 100,000 endpoints before (a scan of the OAuth grants per deleted client,
    // batches deleting their ids by reading whole primary keys, the orphan walk re-reading the old
    // events live todos keep in every batch); 0.54 s after, within the pass's budget
    // (bench/loops.ts). Every statement of a pass goes by its index.
    const cutoff = new Date(now.getTime() - 20 * 86_400_000);
    beforeAll(async () => {
      const [h] = await db.sql`select id from humans limit 1`;
      await db.sql`
        insert into events (source, family, trust_mode, verified, endpoint_id, received_at, disposition)
        select 'github', 'webhook', 'signed', true, (${loopEndpoints}::uuid[])[1 + g % 300], ${now}::timestamptz - (g % 40000) * interval '1 minute',
               case when g % 2 = 0 then 'dropped' else 'recorded' end
        from generate_series(1, 3000) g`;
      await db.sql`
        insert into webhooks (id, endpoint_id, source_type, trust_mode, target_queue, ingest_token_hash, ingest_token_hint, signing_secret, created_by, created_at)
        values ('00000000-0000-4000-8000-00000000a001', ${loopEndpoints[0]!}, 'github', 'signed', 'work', 'loops-hook', 'h', 'plain:s', 'operator', ${now})`;
      await db.sql`
        insert into replay_keys (webhook_id, body_sha256, received_at, event_id)
        select '00000000-0000-4000-8000-00000000a001', sha256(('b' || g)::bytea), ${now}::timestamptz - (g % 40000) * interval '1 minute', g
        from generate_series(1, 5000) g`;
      await db.sql`
        insert into webhook_refusals (webhook_id, bucket, reason, n)
        select '00000000-0000-4000-8000-00000000a001', ${now}::timestamptz - g * interval '1 minute', r, 1
        from generate_series(1, 3000) g, unnest(array['unauthenticated', 'invalid_argument']) r`;
      await db.sql`
        insert into oauth_clients (client_id, client_name, redirect_uris, created_at)
        select 'cl_loops_' || g, 'c', '{http://127.0.0.1/cb}', ${now}::timestamptz - (g % 40) * interval '1 day' from generate_series(1, 2000) g`;
      await db.sql`
        insert into oauth_grants (id, client_id, human_id, endpoint_id, resource, created_at, revoked_at)
        select md5('loops-g' || g)::uuid, 'cl_loops_' || g, ${h!.id}, (${loopEndpoints}::uuid[])[1 + g % 300], 'r', ${now},
               case when g % 20 = 0 then ${now}::timestamptz - (g % 40) * interval '1 day' end
        from generate_series(1, 1800) g`;
      await db.sql`
        insert into oauth_codes (code_hash, grant_id, redirect_uri, code_challenge, expires_at)
        select md5('loops-code' || g), md5('loops-g' || g)::uuid, 'http://127.0.0.1/cb', 'x', ${now}::timestamptz - (g % 40) * interval '1 day'
        from generate_series(1, 1800) g`;
      await db.sql`
        insert into oauth_tokens (token_hash, grant_id, kind, expires_at)
        select md5('loops-tok' || g || k), md5('loops-g' || g)::uuid, k, ${now}::timestamptz - (g % 40) * interval '1 day'
        from generate_series(1, 1800) g, unnest(array['access', 'refresh']) k`;
      await db.sql`
        insert into presence_history (endpoint_id, at, from_presence, to_presence, source, changed_by, reason)
        select (${loopEndpoints}::uuid[])[1 + g % 300], ${now}::timestamptz - (g % 50) * interval '1 day' - g * interval '1 second', 'in', 'out', 'shift', 'shift', 'shift_end'
        from generate_series(1, 6000) g`;
      await db.sql`analyze`;
    });

    // Each statement of a pass, and the index it must go by.
    const expected: [RegExp, string[]][] = [
      [/from todos where .*updated_at </s, ['todos_finished_idx', 'todos_pkey', 'events_pkey']],
      [/e\.disposition in/, ['events_todoless_idx', 'events_pkey']],
      [/with walked as/, ['events_received_at_idx', 'events_pkey']],
      [/from replay_keys/, ['replay_keys_received_at_idx']],
      [/from webhook_refusals/, ['webhook_refusals_bucket_idx']],
      [/from oauth_tokens where expires_at/, ['oauth_tokens_expiry_idx', 'oauth_tokens_pkey']],
      [/from oauth_codes where expires_at/, ['oauth_codes_expiry_idx', 'oauth_codes_pkey']],
      [/from oauth_grants g where g\.revoked_at/, ['oauth_grants_revoked_idx', 'oauth_grants_pkey']],
      [/from oauth_clients c where c\.created_at/, ['oauth_clients_created_idx', 'oauth_grants_client_idx', 'oauth_clients_pkey']],
      [/from presence_history where at/, ['presence_history_at_idx', 'presence_history_pkey']],
    ];
    it('every statement of a pass reads by its index, never a scan of a table (generic and custom plans)', async () => {
      // A pass's statements in its order (services/maintenance/retention.ts), one batch each.
      const statements = await capturedAll(async (sql) => {
        await deleteFinishedTodosUnscoped(sql, cutoff, 200);
        await deleteTodolessEventsUnscoped(sql, cutoff, 200);
        await deleteOrphanEventsUnscoped(sql, cutoff, 400, null);
        await deleteOldReplayKeysUnscoped(sql, cutoff, 200);
        await deleteOldWebhookRefusalsUnscoped(sql, cutoff, 200);
        await deleteExpiredOAuthRowsUnscoped(sql, cutoff, 200);
        await deleteOldPresenceHistoryUnscoped(sql, new Date(now.getTime() - 30 * 86_400_000), 200);
      }, /^\s*(with|delete)/);
      expect(statements.map((st) => expected.findIndex(([re]) => re.test(st.text)))).toEqual(expected.map((_, i) => i));
      for (const [i, { text, params }] of statements.entries()) {
        for (const generic of [false, true]) {
          const scans = await scansOf(text, params, generic);
          const what = `${String(expected[i]![0])} (${generic ? 'generic' : 'custom'}): ${scans.join(', ')}`;
          for (const index of expected[i]![1]) expect(scans, what).toContain(index);
          expect(scans.filter((x) => x.startsWith('seq:')), what).toEqual([]);
        }
      }
    });
  });

  describe("the board's endpoints page", () => {
    // At 100,000 endpoints of one human the page drew every card: 470 MB in 57 s. It now reads one
    // page of them; one endpoint's card counted its todos joined to endpoints and agents per todo
    // (276 ms for a 100,000-deep endpoint), now the endpoint once and its todos by index (57 ms).
    let other = '';
    let otherIds: string[] = [];
    beforeAll(async () => {
      const [h] = await db.sql`insert into humans (handle) values ('plans-board') returning id`;
      other = h!.id as string;
      const agents = await db.sql<{ id: string }[]>`
        insert into agents (owner_human_id, name) select ${other}, 'b' || g from generate_series(1, 20) g returning id`;
      const made = await db.sql<{ id: string }[]>`
        insert into endpoints (agent_id, slug, credential_hash, credential_prefix, scope_queues)
        select a.id, 'board-' || a.id, 'bd' || a.id, 'p', '{work}' from unnest(${agents.map((a) => a.id)}::uuid[]) a(id) returning id`;
      otherIds = made.map((e) => e.id);
      await db.sql`analyze agents`;
      await db.sql`analyze endpoints`;
    });

    for (const generic of [false, true]) {
      it(`a page of a human's endpoints and their count go through the human's agents, not every endpoint (${generic ? 'generic' : 'custom'} plan)`, async () => {
        const statements = await capturedAll((sql) => listOwnEndpointsPage(sql, other, 'active', { offset: 0, limit: 50 }), /from endpoints e join agents/);
        expect(statements).toHaveLength(2);
        for (const { text, params } of statements) {
          const scans = await scansOf(text, params, generic);
          expect(scans, scans.join(', ')).toContain('endpoints_agent_idx');
          expect(scans, scans.join(', ')).not.toContain('seq:endpoints');
        }
      });

      it(`a card's counts read the endpoint once and its live todos by index, never a join per todo (${generic ? 'generic' : 'custom'} plan)`, async () => {
        const { text, params } = await captured((sql) => countEndpointTodos(sql, other, [loopEndpoints[0]!, ...otherIds]), /count\(\*\) filter/);
        const nodes = await planNodes(text, params, generic);
        const todoScans = nodes.filter((n) => n['Relation Name'] === 'todos');
        expect(todoScans.length, JSON.stringify(nodes.map((n) => n['Index Name'] ?? n['Node Type']))).toBe(1);
        expect(String(todoScans[0]!['Index Cond'] ?? todoScans[0]!['Recheck Cond'] ?? ''), 'by endpoint').toMatch(/endpoint_id = ANY/);
        expect(nodes.some((n) => n['Node Type'] === 'Seq Scan' && n['Relation Name'] === 'todos')).toBe(false);
        // endpoints and agents only in the CTE of the human's endpoints: no join has todos under it.
        const under = (n: Record<string, unknown>): Record<string, unknown>[] => [n, ...((n.Plans as Record<string, unknown>[] | undefined) ?? []).flatMap(under)];
        const joins = nodes.filter((n) => /Nested Loop|Hash Join|Merge Join/.test(String(n['Node Type'])));
        expect(joins.filter((j) => under(j).some((n) => n['Relation Name'] === 'todos'))).toEqual([]);
      });
    }
  });

  describe('history loop', () => {
    // A pass counted every live todo and wrote a row per queue each minute, then re-read two hours
    // of minutes to roll up hours: 12.8 s at 1,000,000 pending over 100,000 endpoints (a scan of
    // todos). It now folds what changed (bench/loops.ts): it reads no todo at all.
    beforeAll(async () => {
      await db.sql`
        insert into todo_history (width, bucket, endpoint_id, queue, created, claimed, pending_change)
        select 'm', ${now}::timestamptz - m * interval '1 minute', e.id, q, 1, 1, 0
        from unnest(${loopEndpoints}::uuid[]) e(id), unnest(array['work', 'review']) q, generate_series(1, 60) m`;
      await db.sql`
        insert into todo_history (width, bucket, endpoint_id, queue, created)
        select 'm', ${now}::timestamptz - interval '49 hours' - m * interval '1 minute', e.id, 'work', 1
        from unnest(${loopEndpoints}::uuid[]) e(id), generate_series(1, 5) m`;
      // A pass's rows: the last closed minute's, of every queue (the fixture's own went in one statement).
      await db.sql`delete from todo_history_delta`;
      await db.sql`
        insert into todo_history_delta (bucket, endpoint_id, queue, created, claimed, pending_change, wait_bin)
        select ${now}::timestamptz - interval '1 minute', e.id, q, c.created, c.claimed, c.pending_change, c.wait_bin
        from unnest(${loopEndpoints}::uuid[]) e(id), unnest(array['work', 'review']) q,
             (values (1, 0, 1, null::smallint), (0, 1, -1, 7::smallint)) c(created, claimed, pending_change, wait_bin)`;
      await db.sql`analyze todo_history`;
      await db.sql`analyze todo_history_delta`;
      await db.sql`analyze todo_history_human`;
    });

    it('folds the changes and prunes through their indexes; no statement reads todos (generic and custom plans)', async () => {
      const statements = await capturedAll(async (sql) => {
        await foldHistoryDeltasUnscoped(sql, now);
        await pruneHistoryUnscoped(sql, now, 1000);
      }, /todo_history|todo_depth/);
      expect(statements).toHaveLength(4);
      // Each statement's indexes: read, or the arbiter of its ON CONFLICT.
      const expected = [['todo_history_pkey', 'todo_depth_pkey', 'endpoints_pkey'], ['todo_history_bucket_idx'], ['todo_history_bucket_idx'], ['todo_history_human_bucket_idx']];
      for (const [i, { text, params }] of statements.entries()) {
        for (const generic of [false, true]) {
          const nodes = await planNodes(text, params, generic);
          const scans = [
            ...(await scansOf(text, params, generic)),
            ...nodes.flatMap((n) => (n['Conflict Arbiter Indexes'] as string[] | undefined) ?? []),
          ];
          const what = `statement ${i + 1} (${generic ? 'generic' : 'custom'}): ${scans.join(', ')}`;
          for (const index of expected[i]!) expect(scans, what).toContain(index);
          expect(scans.filter((x) => x === 'seq:todos' || x.startsWith('todos_')), what).toEqual([]);
          // The triggers' table is read whole (every closed minute is folded): it holds a minute or two.
          expect(scans.filter((x) => x.startsWith('seq:') && x !== 'seq:todo_history_delta'), what).toEqual([]);
        }
      }
    });
  });

  describe('presence evaluator', () => {
    // 215 ms a quiet pass, 581 ms a shift boundary claiming 5,625 transitions, over 22,000 watched
    // of 100,000 endpoints (bench/loops.ts): the watchlist is read through its partial index.
    beforeAll(async () => {
      await db.sql`update endpoints set shift = 'TZ=UTC Mon-Fri 09:00-17:00' where id = any(${loopEndpoints.slice(0, 60)}::uuid[])`;
      await db.sql`analyze endpoints`;
    });

    for (const generic of [false, true]) {
      // (Its claims update by primary key: at 100,000 endpoints a Nested Loop on endpoints_pkey; this
      // fixture's 3,600 endpoints are too few for that to beat a hash of them all.)
      it(`reads its watchlist through endpoints_presence_watch_idx, not every endpoint (${generic ? 'generic' : 'custom'} plan)`, async () => {
        const watch = await captured((sql) => presenceWatchlistUnscoped(sql), /from endpoints e/);
        const scans = await scansOf(watch.text, watch.params, generic);
        expect(scans, scans.join(', ')).toContain('endpoints_presence_watch_idx');
        expect(scans, scans.join(', ')).not.toContain('seq:endpoints');
      });
    }
  });
});
