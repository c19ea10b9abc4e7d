import { describe, expect, it } from 'vitest';
import { alice, app, signedIn, useBoardSuite } from '../../test/support/board.ts';

// The board's vend result: the credential once, as an export line, and both ways to connect
// Claude Code with snippets that name ${SWITCHBOARD_AGENT_TOKEN} and never the secret.

useBoardSuite();

const unescape = (s: string) => s.replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&');
const pre = (page: string, id: string) => unescape(new RegExp(`<pre id="${id}" class="copy">([\\s\\S]*?)</pre>`).exec(page)![1]!);

describe('the vend result page', () => {
  it('shows the credential once, as the export line, and two .mcp.json snippets without it', async () => {
    const b = await signedIn(alice);
    const r = await b.post('/endpoints', { name: 'connect-bot', queues: 'reviews', verbs: ['claim'], csrf_token: b.csrfToken });
    expect(r.status).toBe(201);
    const credential = /export SWITCHBOARD_AGENT_TOKEN=<span id="credential" class="secret">(sbk_[A-Za-z0-9_-]{43})<\/span>/.exec(r.text)![1]!;
    expect(r.text.split(credential)).toHaveLength(2);
    const slug = /<dt>Slug<\/dt><dd><code>([a-z0-9-]+)<\/code>/.exec(r.text)![1]!;
    const mcpUrl = `${app.baseUrl}/mcp/${slug}`;

    const bridge = JSON.parse(pre(r.text, 'mcp-json-bridge'));
    expect(bridge).toEqual({
      mcpServers: { switchboard: { command: 'switchboard', args: ['bridge', '--url', mcpUrl], env: { SWITCHBOARD_AGENT_TOKEN: '${SWITCHBOARD_AGENT_TOKEN}' } } },
    });
    const http = JSON.parse(pre(r.text, 'mcp-json'));
    expect(http).toEqual({ mcpServers: { switchboard: { type: 'http', url: mcpUrl, headers: { Authorization: 'Bearer ${SWITCHBOARD_AGENT_TOKEN}' } } } });
    for (const id of ['mcp-json-bridge', 'mcp-json', 'claude-mcp-add', 'claude-mcp-add-bridge', 'launch']) expect(pre(r.text, id)).not.toContain('sbk_');

    expect(pre(r.text, 'launch')).toBe('claude --dangerously-load-development-channels server:switchboard --allowedTools mcp__switchboard');
    expect(pre(r.text, 'claude-mcp-add')).toBe(`claude mcp add switchboard --transport http --scope user ${mcpUrl} --header "Authorization: Bearer $SWITCHBOARD_AGENT_TOKEN"`);
    expect(pre(r.text, 'claude-mcp-add-bridge')).toBe(
      `claude mcp add switchboard --transport stdio --scope user --env SWITCHBOARD_AGENT_TOKEN="$SWITCHBOARD_AGENT_TOKEN" -- switchboard bridge --url ${mcpUrl}`,
    );
    expect(r.text).toContain('2.1.80 or later, signed in with a claude.ai account');
    expect(r.text).toContain('<code>claim_next</code> with <code>wait</code>');
    expect(r.text).toContain('<a href="/docs/connect">connect guide</a>');
    // An OAuth-capable client needs only the URL: the note shows the line without a header.
    expect(unescape(r.text)).toContain(`An OAuth-capable client can connect with this URL alone, no header and no credential: <code>claude mcp add switchboard --transport http --scope user ${mcpUrl}</code>, then <code>/mcp</code> in Claude Code to authenticate, and approve it on the board's consent page`);
  });
});
