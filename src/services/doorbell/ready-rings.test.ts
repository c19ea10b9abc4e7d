import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { push, vend, withApp, type Api, type TestDb } from '../../../test/support/fixtures.ts';
import { until, type Agent, type Vended } from '../../../test/support/agents.ts';

/**
 * ReadyRings.ringReady when the ready-ring claim cannot be asked: a database fault (here a trigger
 * that fails the claim's update, as a restart fails it) must not lose the todo's doorbell.
 */

const fixture = withApp();
let db: TestDb;
let api: Api;
beforeAll(() => void ({ db, api } = fixture));

/** The next `failures` ready-ring claims fail; a sequence counts them, as a rollback does not undo it. */
async function failGateInserts(failures: number): Promise<void> {
  await db.sql.unsafe(`
    create sequence test_gate_attempts;
    create function test_fail_gate() returns trigger language plpgsql as $$
    begin
      if nextval('test_gate_attempts') <= ${failures} then raise exception 'injected ready-ring claim fault'; end if;
      return new;
    end $$;
    create trigger test_fail_gate before update on todos for each row
      when (old.last_ringed_at is null and new.last_ringed_by = 'ring') execute function test_fail_gate();`);
}

afterEach(async () => {
  await db.sql.unsafe(`
    drop trigger if exists test_fail_gate on todos;
    drop function if exists test_fail_gate();
    drop sequence if exists test_gate_attempts;`);
});

async function agentWithTodo(failures: number): Promise<{ e: Vended; a: Agent; id: string }> {
  const e = await vend(api, { name: 'agent', queues: ['reviews'] });
  const a = await fixture.agent(e);
  await failGateInserts(failures);
  const { id } = await push(api, e, { title: 'ring me', queue: 'reviews' });
  return { e, a, id };
}

const rangFor = (a: Agent, id: string) => a.heard.filter((n) => n.params.meta.todo_id === id).length;

describe('ReadyRings.ringReady', () => {
  it('asks a failed ready-ring claim again: the todo rings once the database answers', async () => {
    const { a, id } = await agentWithTodo(2);
    await until(() => rangFor(a, id) > 0, 'the doorbell after two failed claims');
    expect(await db.sql`select last_ringed_by from todos where id = ${id}`).toEqual([{ last_ringed_by: 'ring' }]);
    expect(rangFor(a, id)).toBe(1);
  });

  it('after its retries lets the todo through the local gate, so the next ready signal rings it', async () => {
    const { e, a, id } = await agentWithTodo(4);
    await until(async () => Number((await db.sql`select last_value from test_gate_attempts`)[0]!.last_value) >= 4, 'four claim attempts', 10_000);
    await new Promise((r) => setTimeout(r, 100));
    expect(rangFor(a, id)).toBe(0);
    // What a todo_ready wakeup or the LISTEN catch-up does for it:
    fixture.app.services.readyRings.ringFresh(e.id, 'reviews');
    await until(() => rangFor(a, id) > 0, 'the doorbell on the next ready signal');
    expect(rangFor(a, id)).toBe(1);
  });
});
