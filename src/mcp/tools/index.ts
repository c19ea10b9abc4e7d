import type { Session } from '../../sessions/registry.ts';
import { doorbellSelfTools } from './doorbell.ts';
import { drainTools } from './drain.ts';
import { hookTools } from './hooks.ts';
import { presenceTools } from './presence.ts';
import type { Tool } from './tool.ts';
import { webhookTools } from './webhooks.ts';
import { whoamiTool } from './whoami.ts';

// The catalog of agent verbs. A new verb: a service method, a file (or an entry) here, and its
// family's list below; tools/list shows granted verbs in this order, then the self verbs.

/** Every verb an endpoint can be granted, by name. */
export const GRANTABLE_TOOLS = new Map<string, Tool>([...drainTools, ...webhookTools, ...hookTools].map((t) => [t.name, t]));
/** Verbs every active endpoint has, whatever its scope (the presence and self-test verbs, and whoami). */
export const SELF_TOOLS = new Map<string, Tool>([...presenceTools, ...doorbellSelfTools, whoamiTool].map((t) => [t.name, t]));

const toolsByGrant = new WeakMap<readonly string[], Tool[]>();

/** The tools a session may call, in tools/list order; worked out once per grant (an endpoint's verbs). */
export function toolsFor(session: Session): Tool[] {
  const verbs = session.endpoint.verbs;
  let tools = toolsByGrant.get(verbs);
  if (!tools) {
    tools = [...[...GRANTABLE_TOOLS.values()].filter((t) => verbs.includes(t.name)), ...SELF_TOOLS.values()];
    toolsByGrant.set(verbs, tools);
  }
  return tools;
}

export { callTool, describeTool, toolError, verbNotGranted, type AgentServices, type Tool, type ToolAnnotations, type ToolContext } from './tool.ts';
