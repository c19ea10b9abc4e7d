import type { Sql } from '../src/db/connect.ts';

// The queue history's four triggers, switched off and on between a bench's slices, and what they
// have counted: bench/history.ts (the store's paths) and bench/history-surface.ts (HTTP and MCP).

export const TRIGGERS: Record<'todos' | 'doorbell_rings', string[]> = {
  todos: ['todo_history_insert', 'todo_history_update'],
  doorbell_rings: ['ring_history_insert', 'ring_history_update'],
};

/** Enables or disables the history's four triggers (ALTER TABLE takes its lock between slices, when nothing runs). */
export async function setHistory(sql: Sql, on: boolean): Promise<void> {
  const verb = on ? 'enable' : 'disable';
  for (const [table, names] of Object.entries(TRIGGERS)) {
    await sql.unsafe(`alter table ${table} ${names.map((n) => `${verb} trigger ${n}`).join(', ')}`);
  }
  const rows = await sql<{ tgname: string; tgenabled: string }[]>`
    select tgname, tgenabled from pg_trigger where tgname = any(${sql.array(Object.values(TRIGGERS).flat())})`;
  if (rows.length !== 4 || rows.some((r) => (r.tgenabled !== 'D') !== on)) throw new Error(`the history triggers are not all ${verb}d: ${JSON.stringify(rows)}`);
}

/** What the history has counted so far: todos created, claimed and completed, folded or not. */
export async function counted(sql: Sql): Promise<{ created: number; claimed: number; completed: number }> {
  const [r] = await sql<{ created: number; claimed: number; completed: number }[]>`
    select coalesce(sum(created), 0)::int as created, coalesce(sum(claimed), 0)::int as claimed, coalesce(sum(completed), 0)::int as completed
    from (select created, claimed, completed from todo_history where width = 'm'
          union all select created, claimed, completed from todo_history_delta) c`;
  return r!;
}
