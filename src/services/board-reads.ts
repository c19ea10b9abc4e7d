import {
  countEndpointTodos,
  countHumanTodos,
  getHumanTodo,
  latestSelfTests,
  listHumanTodos,
  todoChangesSince,
  type ClaimingClient,
  type HumanTodoRow,
  type TodoChange,
  type TodoCount,
} from '../store/board.ts';
import type { SelfTestRow } from '../store/selftests.ts';
import type { TodoRow, TodoState } from '../store/todos/index.ts';
import type { ServiceBase } from './base.ts';

export type { ClaimingClient, HumanTodoRow, SelfTestRow, TodoChange, TodoCount };
export type HumanTodo = TodoRow & { endpoint_slug: string; agent_name: string } & ClaimingClient;

/**
 * The board's reads across one human's endpoints (todos, counts, changes, latest self-tests).
 * Every todo read is scoped to the human in the same statement; self-test rows never show.
 */
export class BoardReads {
  constructor(private readonly base: Pick<ServiceBase, 'sql'>) {}

  /** Newest first; `endpointId` (one of the human's) narrows to one endpoint. */
  todos(humanId: string, f: { endpointId?: string; state?: TodoState; queue?: string; limit: number }): Promise<HumanTodoRow[]> {
    return listHumanTodos(this.base.sql, humanId, f);
  }

  /** How many of the human's todos are in each (endpoint, state, queue). */
  todoCounts(humanId: string): Promise<TodoCount[]> {
    return countHumanTodos(this.base.sql, humanId);
  }

  /** Pending and claimed todos of each given endpoint of the human's (absent: none). */
  endpointCounts(humanId: string, endpointIds: readonly string[]): Promise<Map<string, { pending: number; claimed: number }>> {
    return countEndpointTodos(this.base.sql, humanId, endpointIds);
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
