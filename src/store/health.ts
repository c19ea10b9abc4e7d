import type { Sql } from '../db/connect.ts';

/** Resolves when the database answers a trivial query; rejects when it cannot be reached. */
export async function pingDatabase(sql: Sql): Promise<void> {
  await sql`select 1`;
}
