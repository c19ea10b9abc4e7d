import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startThrowawayCluster, type RunningCluster } from '../support/throwaway-cluster.ts';
import { connect, type Sql } from '../../src/db/connect.ts';
import { migrate } from '../../src/db/migrate.ts';
import { apiCaller, humanWithToken } from '../support/app.ts';
import { push, vend } from '../support/fixtures.ts';
import { connectRemoteAgent, spawnServe, stopAllServes, waitFor, type RemoteAgent, type ServeProcess } from '../support/processes.ts';

/**
 * Fault: `kill -9` of a serve process while its agent holds claimed todos. Two real `serve`
 * processes share one throwaway PostgreSQL; the agent on A claims with a short, fenced lease; A is
 * SIGKILLed; an agent on B drains the same queue once the leases run out. Every todo must end done
 * exactly once, and the worker that held the old leases must not be able to finish anything.
 */

const LEASE_SECONDS = 3;
const TODOS = 8;
const CLAIMED_ON_A = 5;

let cluster: RunningCluster;
let sql: Sql;
let a: ServeProcess;
let b: ServeProcess;
const agents: RemoteAgent[] = [];

beforeAll(async () => {
  cluster = await startThrowawayCluster({ prefer: 'system' });
  sql = connect(cluster.url, { max: 3 });
  await migrate(sql);
  [a, b] = await Promise.all([spawnServe({ databaseUrl: cluster.url }), spawnServe({ databaseUrl: cluster.url })]);
});

afterAll(async () => {
  await Promise.all(agents.map((g) => g.close()));
  await stopAllServes();
  await sql?.end({ timeout: 5 });
  await cluster?.stop();
});

describe('kill -9 of a serve process holding claimed todos', () => {
  it('the leases expire, an agent on the second instance claims them again, and each todo is done exactly once', async () => {
    const human = await humanWithToken(sql);
    const viaA = apiCaller(a.url, human.token);
    const { slug, token, mcp_url: mcpUrl } = await vend(viaA, { name: 'worker', queues: ['jobs'] });
    const ids: string[] = [];
    for (let i = 0; i < TODOS; i++) ids.push((await push(viaA, slug, { title: `job ${i}`, payload: { n: i } })).id);

    // The agent on A takes five todos under short fenced leases, then its server dies mid-work.
    const onA = await connectRemoteAgent(mcpUrl, token, a.url);
    agents.push(onA);
    const heldOnA = new Map<string, string>();
    for (let i = 0; i < CLAIMED_ON_A; i++) {
      const r = await onA.call('claim_next', { lease_ttl_seconds: LEASE_SECONDS, require_fence: true });
      expect(r).toMatchObject({ empty: false, todo: { state: 'claimed', attempt: 1 } });
      heldOnA.set(r.todo.id, r.lease_token);
    }
    const claimedRows = await sql<{ id: string; lease_expires_at: Date }[]>`select id, lease_expires_at from todos where state = 'claimed' and attempt = 1`;
    expect(claimedRows.map((r) => r.id).sort()).toEqual([...heldOnA.keys()].sort());
    const leaseEnds = new Map(claimedRows.map((r) => [r.id, r.lease_expires_at.getTime()]));

    a.child.kill('SIGKILL');
    const killedAt = Date.now();
    expect(await a.exited).toEqual({ code: null, signal: 'SIGKILL' });
    await expect(fetch(`${a.url}/healthz`)).rejects.toThrow();

    // A fresh agent on B drains the queue: the never-claimed todos at once, the orphaned ones as
    // soon as their leases expire (a claim sees an expired lease without waiting for a reaper).
    const onB = await connectRemoteAgent(mcpUrl, token, b.url);
    agents.push(onB);
    const reclaimedAt = new Map<string, number>();
    const leaseOnB = new Map<string, string>();
    await waitFor(
      async () => {
        const r = await onB.call('claim_next', { lease_ttl_seconds: 120, require_fence: true });
        if (r.error) throw new Error(r.error);
        if (!r.empty) {
          expect(reclaimedAt.has(r.todo.id)).toBe(false);
          reclaimedAt.set(r.todo.id, Date.now());
          leaseOnB.set(r.todo.id, r.lease_token);
          expect(r.todo.attempt).toBe(heldOnA.has(r.todo.id) ? 2 : 1);
        }
        return reclaimedAt.size === TODOS;
      },
      'every todo to be claimed on B',
      LEASE_SECONDS * 1000 + 15_000,
      100,
    );
    const orphanRecovery = Math.max(...[...heldOnA.keys()].map((id) => reclaimedAt.get(id)! - killedAt));
    // No orphan came back before its lease ran out (one clock: both servers run on this machine).
    for (const id of heldOnA.keys()) expect(reclaimedAt.get(id)!).toBeGreaterThanOrEqual(leaseEnds.get(id)!);

    // The worker that held A's leases reconnects through B and tries to finish its old work with
    // its old lease tokens: every attempt is a conflict, so nothing is recorded done by it.
    const zombie = await connectRemoteAgent(mcpUrl, token, b.url, 'zombie-worker');
    agents.push(zombie);
    for (const [id, leaseToken] of heldOnA) {
      expect(await zombie.call('complete', { id, lease_token: leaseToken, result: { by: 'zombie' } })).toEqual({ error: expect.stringMatching(/^conflict: /) });
      expect(await zombie.call('heartbeat', { id, lease_token: leaseToken })).toEqual({ error: expect.stringMatching(/^conflict: /) });
    }

    // B completes each todo once; a second complete of a done todo is a conflict.
    for (const [id, leaseToken] of leaseOnB) {
      expect(await onB.call('complete', { id, lease_token: leaseToken, result: { by: 'B' } })).toMatchObject({ id, state: 'done' });
    }
    for (const [id, leaseToken] of leaseOnB) {
      expect(await onB.call('complete', { id, lease_token: leaseToken, result: { by: 'B again' } })).toEqual({ error: expect.stringMatching(/^conflict: /) });
      expect(await onB.call('complete', { id, result: { by: 'B unfenced' } })).toEqual({ error: expect.stringMatching(/^conflict: /) });
    }

    const rows = await sql<{ id: string; state: string; attempt: number; result: { by: string }; completed_at: Date | null; lease_expires_at: Date | null }[]>`
      select id, state, attempt, result, completed_at, lease_expires_at from todos order by id`;
    expect(rows).toHaveLength(TODOS);
    for (const row of rows) {
      expect(row).toMatchObject({ state: 'done', result: { by: 'B' }, lease_expires_at: null });
      expect(row.completed_at).not.toBeNull();
      expect(row.attempt).toBe(heldOnA.has(row.id) ? 2 : 1);
    }
    expect(new Set(rows.map((r) => r.id))).toEqual(new Set(ids));
    // B is still serving, and its own claims were never disturbed.
    expect((await fetch(`${b.url}/healthz`)).status).toBe(200);
    console.info(
      `[faults] kill -9: ${heldOnA.size} orphaned claims (lease ${LEASE_SECONDS} s) claimed again on B ${orphanRecovery} ms after SIGKILL; ` +
        `${TODOS} todos done once each`,
    );
  });
});
