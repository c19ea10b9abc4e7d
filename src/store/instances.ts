import type { Sql, TxSql } from '../db/connect.ts';

/**
 * An instance that has not heartbeaten for this long is dead: its streams no longer count. Process
 * liveness is wall-clock time, read from the database's clock (now()), never the injected clock:
 * moving a test's clock must not kill the instances it runs.
 */
export const INSTANCE_DEAD_AFTER_MS = 20_000;
export const deadAfter = (sql: Sql | TxSql) => sql`make_interval(secs => ${INSTANCE_DEAD_AFTER_MS / 1000})`;

/** This instance is alive (inserted on the first beat). */
export async function heartbeatInstance(sql: Sql, id: string, version: string): Promise<void> {
  await sql`
    insert into instances (id, started_at, heartbeat_at, version) values (${id}, now(), now(), ${version})
    on conflict (id) do update set heartbeat_at = excluded.heartbeat_at`;
}

/** Deletes instances that stopped heartbeating; the streams they held are cleared with them. */
export async function reapDeadInstancesUnscoped(sql: Sql): Promise<string[]> {
  const rows = await sql<{ id: string }[]>`delete from instances where heartbeat_at <= now() - ${deadAfter(sql)} returning id`;
  return rows.map((r) => r.id);
}

/** A clean shutdown: the instance and the streams it held are gone at once; its sessions stay. */
export async function removeInstance(sql: Sql, id: string): Promise<void> {
  await sql`delete from instances where id = ${id}`;
}
