/** Where an endpoint's agent connects: `<base>/mcp/<slug>`. */
export const mcpUrl = (baseUrl: string, slug: string): string => `${baseUrl}/mcp/${slug}`;

/** The client wiring for `.mcp.json`; server key `switchboard`. */
export function mcpJson(url: string, credential: string) {
  return { mcpServers: { switchboard: { type: 'http', url, headers: { Authorization: `Bearer ${credential}` } } } };
}
