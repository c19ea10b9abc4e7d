/**
 * Compile time only (nothing imports this file): the wire types of wire.ts that mirror a type the
 * domain or the services build are equal to it, so a new state, verdict or field on either side
 * fails `npm run typecheck` here rather than passing unnoticed. (The routes check one direction
 * already: what a handler returns must be assignable to its wire type.)
 */
import type { BridgeServerEntry, HttpServerEntry, McpJson } from '../domain/connect-instructions.ts';
import type { Presence, PresenceChangeReason, PresenceSource } from '../domain/presence/index.ts';
import type { Verdict } from '../services/doorbell/self-tests.ts';
import type { PresenceView as ServicePresenceView } from '../services/presence.ts';
import type { TodoDetail as StoredTodoDetail, TodoState as StoredTodoState, TodoSummary as StoredTodoSummary } from '../services/todos.ts';
import type { DoorbellTestReport, EndpointView, PresenceChange, PresenceView, TodoDetail, TodoState, TodoSummary, VendResult } from './wire.ts';

/** True when A and B are the same type: `true satisfies Same<A, B>` fails to compile on drift. */
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;

true satisfies Same<EndpointView['presence']['presence'], Presence>;
true satisfies Same<EndpointView['presence']['source'], PresenceSource>;
true satisfies Same<VendResult['mcp_json'], McpJson<HttpServerEntry>>;
true satisfies Same<VendResult['mcp_json_bridge'], McpJson<BridgeServerEntry>>;
true satisfies Same<TodoState, StoredTodoState>;
true satisfies Same<TodoSummary, StoredTodoSummary>;
true satisfies Same<TodoDetail, StoredTodoDetail>;
true satisfies Same<PresenceView, ServicePresenceView>;
true satisfies Same<PresenceChange['reason'], PresenceChangeReason>;
true satisfies Same<PresenceChange['source'], PresenceSource>;
true satisfies Same<DoorbellTestReport['verdict'], Verdict>;
