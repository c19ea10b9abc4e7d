import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migratedDatabase } from '../../test/support/app.ts';
import type { Sql } from '../db/connect.ts';
import { chargeDueRingsUnscoped, claimNextTodo } from './todos/index.ts';

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
/** The scans of a statement's plan: each index it uses, and `seq:<table>` for each sequential scan. */
async function scansOf(statement: string, params: unknown[], generic: boolean): Promise<string[]> {
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
    const [row] = await tx.unsafe(`explain (format json) execute ${name}(${literal})`);
    await tx.unsafe(`deallocate ${name}`);
    const found: string[] = [];
    const walk = (node: Record<string, unknown>) => {
      if (typeof node['Index Name'] === 'string') found.push(node['Index Name'] as string);
      if (node['Node Type'] === 'Seq Scan') found.push(`seq:${node['Relation Name'] as string}`);
      for (const child of (node.Plans as Record<string, unknown>[] | undefined) ?? []) walk(child);
    };
    walk((row!['QUERY PLAN'] as { Plan: Record<string, unknown> }[])[0]!.Plan);
    return found;
  });
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
      // The WHERE of transitionHeld (heartbeat, complete, fail, release) in src/store/todos/transitions.ts.
      const used = await indexesUsed(
        `update todos set updated_at = now()
         where id = $1 and endpoint_id = $2 and not synthetic and queue = any($3::text[]) and queue <> '_switchboard'
           and state = 'claimed' and owner = $4 and lease_token_hash is not distinct from null`,
        [id, endpointId, ['q'], 'agent:x'],
        generic,
      );
      expect(used).toEqual(['todos_pkey']);
    });
  }

  it('the reaper finds expired leases through its own index', async () => {
    const used = await indexesUsed(`select id from todos where state = 'claimed' and lease_expires_at < $1::timestamptz`, [new Date().toISOString()], false);
    expect(used).toEqual(['todos_expired_lease_idx']);
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
    it(`finds the endpoint's ringing self-test and stamps a claimed one's report without reading a week of reports (${generic ? 'generic' : 'custom'} plan)`, async () => {
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
      expect(scans.filter((s) => s === 'doorbell_tests_unclaimed_idx')).toHaveLength(2);
      expect(scans).not.toContain('seq:doorbell_tests');
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
