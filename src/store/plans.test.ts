import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migratedDatabase } from '../../test/support/app.ts';

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

async function indexesUsed(statement: string, params: unknown[], generic: boolean): Promise<string[]> {
  return db.sql.begin(async (tx) => {
    await tx.unsafe(`set local plan_cache_mode = ${generic ? 'force_generic_plan' : 'force_custom_plan'}`);
    await tx.unsafe(`prepare probe as ${statement}`);
    const literal = params.map((p) => (Array.isArray(p) ? `array[${p.map((x) => `'${x}'`).join(',')}]` : `'${p}'`)).join(', ');
    const [row] = await tx.unsafe(`explain (format json) execute probe(${literal})`);
    await tx.unsafe('deallocate probe');
    const found: string[] = [];
    const walk = (node: Record<string, unknown>) => {
      if (typeof node['Index Name'] === 'string') found.push(node['Index Name'] as string);
      for (const child of (node.Plans as Record<string, unknown>[] | undefined) ?? []) walk(child);
    };
    walk((row!['QUERY PLAN'] as { Plan: Record<string, unknown> }[])[0]!.Plan);
    return found;
  });
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
