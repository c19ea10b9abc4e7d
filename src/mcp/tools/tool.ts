import { z } from 'zod';
import type { Clock } from '../../lib/clock.ts';
import { SwitchboardError } from '../../domain/errors.ts';
import { classifyAndLog } from '../../web/errors.ts';
import type { TodoWork } from '../../services/todo-work.ts';
import type { AgentPresence } from '../../services/presence-agent.ts';
import type { DoorbellAcks } from '../../services/doorbell/acks.ts';
import type { PresenceService } from '../../services/presence.ts';
import type { SelfTests } from '../../services/doorbell/self-tests.ts';
import type { Webhooks } from '../../services/webhooks.ts';
import type { WebhookRouting } from '../../services/webhook-routing.ts';
import type { NotifyHooks } from '../../services/notify-hooks.ts';
import type { Logger } from '../../lib/log.ts';
import { parseInput } from '../../domain/validate.ts';
import type { Session } from '../../sessions/registry.ts';

/** What the agent verbs may use: the one bag of services the MCP layer hands down. */
export interface AgentServices {
  clock: Clock;
  todoWork: TodoWork;
  agentPresence: AgentPresence;
  log: Logger;
  presence: PresenceService;
  acks: DoorbellAcks;
  selfTests: SelfTests;
  webhooks: Webhooks;
  webhookRouting: WebhookRouting;
  hooks: NotifyHooks;
}

export interface ToolContext extends AgentServices {
  session: Session;
  /** Aborted when the call should stop: the client cancelled it or went away, the session ended, the server stops. */
  signal: AbortSignal;
  /** Marks the session active now (a long-waiting call keeps it live). */
  keepAlive(): void;
  /** Every verb this session may call, in tools/list order (a refusal names them). */
  grantedVerbs: readonly string[];
}

/**
 * MCP tool annotations (spec 2025-03-26 on): hints a client shows or uses to decide whether to ask
 * before a call. Required on every tool, so a new verb cannot ship without saying what it does.
 */
export interface ToolAnnotations {
  /** A human-readable name. */
  title: string;
  /** True: the verb changes nothing. */
  readOnlyHint: boolean;
  /** True: a change it makes may destroy or undo something (meaningful only when not read-only). */
  destructiveHint: boolean;
  /** True: calling it again with the same arguments changes nothing more. */
  idempotentHint: boolean;
  /** True: it reaches outside Switchboard (the notify hooks' outbound calls). */
  openWorldHint: boolean;
}

export interface Tool<S extends z.ZodType = z.ZodType> {
  name: string;
  description: string;
  annotations: ToolAnnotations;
  input: S;
  run(ctx: ToolContext, args: z.infer<S>): Promise<unknown>;
  /** What the verb does for an endpoint not granted it (claim: one's own self-test todo); absent: refused. */
  runUngranted?(ctx: ToolContext, args: z.infer<S>): Promise<unknown>;
  /** With runUngranted: the verb is listed to an endpoint not granted it, described by this (what runUngranted does). */
  ungrantedDescription?: string;
}

/** The refusal of a verb this session may not call: it names the verbs it may, and where to see them. */
export const verbNotGranted = (name: string, granted: readonly string[]) =>
  new SwitchboardError('forbidden', `verb "${name}" is not granted to this endpoint; granted: ${granted.join(', ')} (whoami lists them)`, {
    granted: [...granted],
  });

/** Helper so each tool's `run` sees its own argument type. */
export const defineTool = <S extends z.ZodType>(tool: Tool<S>): Tool => tool as unknown as Tool;

export interface ToolResult {
  content: { type: 'text'; text: string }[];
  structuredContent?: Record<string, unknown>;
  isError?: boolean;
}

const jsonSchemaCache = new WeakMap<Tool, Record<string, unknown>>();

/** The tools/list entry: name, title, description, the input's JSON Schema and the annotations. */
export function describeTool(tool: Tool): {
  name: string;
  title: string;
  description: string;
  inputSchema: Record<string, unknown>;
  annotations: ToolAnnotations;
} {
  let schema = jsonSchemaCache.get(tool);
  if (!schema) {
    const { $schema: _drop, ...rest } = z.toJSONSchema(tool.input, { io: 'input' }) as Record<string, unknown>;
    schema = rest;
    jsonSchemaCache.set(tool, schema);
  }
  return { name: tool.name, title: tool.annotations.title, description: tool.description, inputSchema: schema, annotations: tool.annotations };
}

export function toolSuccess(value: unknown): ToolResult {
  const structured = (value && typeof value === 'object' && !Array.isArray(value) ? value : { value }) as Record<string, unknown>;
  return { content: [{ type: 'text', text: JSON.stringify(value) }], structuredContent: structured };
}

export function toolError(err: SwitchboardError): ToolResult {
  return {
    content: [{ type: 'text', text: `${err.code}: ${err.message}` }],
    structuredContent: { error: { code: err.code, message: err.message, ...err.details } },
    isError: true,
  };
}

/** Runs a tool: arguments validated strictly, typed errors become tool errors with their code. */
export async function callTool(tool: Tool, ctx: ToolContext, rawArgs: unknown): Promise<ToolResult> {
  try {
    const args = parseInput(tool.input, rawArgs ?? {}, 'arguments');
    return toolSuccess(await tool.run(ctx, args));
  } catch (err) {
    return toolError(classifyAndLog(err, ctx.log, { tool: tool.name, slug: ctx.session.endpoint.slug }, 'tool failed', () => null));
  }
}
