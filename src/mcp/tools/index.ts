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

/**
 * A grantable verb as listed to an endpoint not granted it (DESIGN decision 11: `claim` of one's
 * own self-test todo): described and run as what it does without the grant. Made once per verb.
 */
const UNGRANTED_TOOLS = new Map<string, Tool>(
  [...GRANTABLE_TOOLS.values()]
    .filter((t) => t.runUngranted && t.ungrantedDescription)
    .map((t) => [t.name, { ...t, description: t.ungrantedDescription!, run: t.runUngranted! }]),
);

/**
 * The tools a session may call, in tools/list order: its granted verbs, the verbs it may call
 * without their grant (listed by what they then do), then the self verbs. Worked out once per
 * grant (an endpoint's verbs).
 */
export function toolsFor(session: Session): Tool[] {
  const verbs = session.endpoint.verbs;
  let tools = toolsByGrant.get(verbs);
  if (!tools) {
    const granted = [...GRANTABLE_TOOLS.values()].filter((t) => verbs.includes(t.name));
    const ungranted = [...UNGRANTED_TOOLS.values()].filter((t) => !verbs.includes(t.name));
    tools = [...granted, ...ungranted, ...SELF_TOOLS.values()];
    toolsByGrant.set(verbs, tools);
  }
  return tools;
}

/** Whether `tool` is listed to a session only for what it does without its grant. */
export const isUngrantedListing = (tool: Tool): boolean => UNGRANTED_TOOLS.get(tool.name) === tool;

export { callTool, describeTool, toolError, verbNotGranted, type AgentServices, type Tool, type ToolAnnotations, type ToolContext } from './tool.ts';
