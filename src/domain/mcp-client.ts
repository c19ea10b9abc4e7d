/** Where an endpoint's agent connects: `<base>/mcp/<slug>`. */
export const mcpUrl = (baseUrl: string, slug: string): string => `${baseUrl}/mcp/${slug}`;

