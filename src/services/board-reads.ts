import {
  countHumanTodos,
  getHumanTodo,
  latestSelfTests,
  listHumanTodos,
  todoChangesSince,
  type HumanTodoRow,
  type TodoChange,
} from '../store/board.ts';
import type { SelfTestRow } from '../store/selftests.ts';
import type { TodoRow, TodoState } from '../store/todos/index.ts';
import type { ServiceBase } from './base.ts';

export type { HumanTodoRow, SelfTestRow, TodoChange };
export type HumanTodo = TodoRow & { endpoint_slug: string; agent_name: string };

/**
 * The board's reads across one human's endpoints (todos, counts, changes, latest self-tests).
 * Every todo read is scoped to the human in the same statement; self-test rows never show.
 */
export class BoardReads {
  constructor(private readonly base: Pick<ServiceBase, 'sql'>) {}

  todos(humanId: string, f: { state?: TodoState; queue?: string; limit: number }): Promise<HumanTodoRow[]> {
    return listHumanTodos(this.base.sql, humanId, f);
  }

  /** How many of the human's todos are in each (state, queue). */
  todoCounts(humanId: string): Promise<{ state: TodoState; queue: string; n: number }[]> {
    return countHumanTodos(this.base.sql, humanId);
  }

  /** One of the human's todos, or null (another human's answers the same). */
  todo(humanId: string, id: string): Promise<HumanTodo | null> {
    return getHumanTodo(this.base.sql, humanId, id);
  }

  /** The latest self-test of each endpoint; pass only the caller's own endpoints' ids. */
  latestSelfTests(endpointIds: readonly string[]): Promise<SelfTestRow[]> {
    return latestSelfTests(this.base.sql, endpointIds);
  }

  /** Todos of the given endpoints changed at or after `since`. */
  todoChangesSince(endpointIds: readonly string[], since: Date): Promise<TodoChange[]> {
    return todoChangesSince(this.base.sql, endpointIds, since);
  }
}
