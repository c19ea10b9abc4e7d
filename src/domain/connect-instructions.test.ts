import { describe, expect, it } from 'vitest';
import { AGENT_TOKEN_ENV, connectInstructions, connectText, exportLine } from './connect-instructions.ts';

const URL = 'https://switchboard.example.com/mcp/review-bot-3fa91c0d';
const SLUG = 'review-bot-3fa91c0d';
const TOKEN = 'sbk_' + 'A1b2C3d4'.repeat(5) + 'xyz';

describe('connect instructions', () => {
  const c = connectInstructions({ mcpUrl: URL, slug: SLUG });

  it('the direct HTTP .mcp.json names the server, the URL and the token variable, and parses back', () => {
    expect(JSON.parse(JSON.stringify(c.http.mcpJson))).toEqual({
      mcpServers: { switchboard: { type: 'http', url: URL, headers: { Authorization: 'Bearer ${SWITCHBOARD_AGENT_TOKEN}' } } },
    });
  });

  it('the bridge .mcp.json runs `switchboard bridge --url` with the token passed through its env, and parses back', () => {
    expect(JSON.parse(JSON.stringify(c.bridge.mcpJson))).toEqual({
      mcpServers: { switchboard: { command: 'switchboard', args: ['bridge', '--url', URL], env: { SWITCHBOARD_AGENT_TOKEN: '${SWITCHBOARD_AGENT_TOKEN}' } } },
    });
  });

  it('the launch line names the channel and allows its tools by the server name, with the version and sign-in it needs', () => {
    expect(c.bridge.launch).toBe('claude --dangerously-load-development-channels server:switchboard --allowedTools mcp__switchboard');
    const named = connectInstructions({ mcpUrl: URL, slug: SLUG, serverName: 'reviews' });
    expect(named.bridge.launch).toBe('claude --dangerously-load-development-channels server:reviews --allowedTools mcp__reviews');
    expect(named.bridge.claudeMcpAdd).toMatch(/^claude mcp add reviews --transport stdio /);
    expect(named.http.claudeMcpAdd).toMatch(/^claude mcp add reviews --transport http /);
    expect(Object.keys(named.bridge.mcpJson.mcpServers)).toEqual(['reviews']);
    expect(Object.keys(named.http.mcpJson.mcpServers)).toEqual(['reviews']);
    expect(c.bridge.notes.join(' ')).toContain('2.1.80 or later, signed in with a claude.ai account');
  });

  it('the credential is only in the export line: never in a snippet, a command or the text', () => {
    expect(exportLine(TOKEN)).toBe(`export SWITCHBOARD_AGENT_TOKEN=${TOKEN}`);
    const everything = JSON.stringify(c) + connectText(c);
    expect(everything).not.toContain('sbk_');
    expect(everything).toContain(`\${${AGENT_TOKEN_ENV}}`);
    // The claude mcp add lines let the shell fill the variable in, from the exported value. The
    // server name comes right after `add`: --env and --header take several values, so a name after
    // them is not a name (test/claude-code-lines.test.ts runs these lines with the real CLI).
    expect(c.http.claudeMcpAdd).toBe(`claude mcp add switchboard --transport http --scope user ${URL} --header "Authorization: Bearer $SWITCHBOARD_AGENT_TOKEN"`);
    expect(c.bridge.claudeMcpAdd).toBe(
      `claude mcp add switchboard --transport stdio --scope user --env SWITCHBOARD_AGENT_TOKEN="$SWITCHBOARD_AGENT_TOKEN" -- switchboard bridge --url ${URL}`,
    );
  });

  it('the text shows both snippets as JSON that parses, the launch line, the fallbacks and the guide', () => {
    const text = connectText(connectInstructions({ mcpUrl: URL, slug: SLUG, guideUrl: 'https://switchboard.example.com/docs/connect' }));
    const blocks = [...text.matchAll(/^ {2}\{\n[\s\S]*?\n {2}\}$/gm)].map((m) => JSON.parse(m[0]));
    expect(blocks).toEqual([c.bridge.mcpJson, c.http.mcpJson]);
    expect(text).toContain(`  ${c.bridge.launch}\n`);
    expect(text).toContain('`claim_next` with `wait`');
    expect(text).toContain(`switchboard hook create ${SLUG} --url`);
    expect(text).toContain(`switchboard doctor ${SLUG}`);
    expect(text).toContain('`test_doorbell`');
    expect(text).toContain('Guide: https://switchboard.example.com/docs/connect\n');
  });

  it('says an OAuth-capable client can connect with the URL alone, approving on the board, without any credential', () => {
    const byUrl = c.http.notes.at(-1)!;
    expect(byUrl).toContain(`\`claude mcp add switchboard --transport http --scope user ${URL}\`, then \`/mcp\` in Claude Code to authenticate`);
    expect(byUrl).toContain("approve it on the board's consent page");
    expect(byUrl).not.toMatch(/Authorization|SWITCHBOARD_AGENT_TOKEN|--header/);
    const text = connectText(c);
    expect(text).toContain(`  - ${byUrl}\n`);
    // A note, not a printed command line: the lines test/claude-code-lines.test.ts runs are the two with a credential.
    expect([...text.matchAll(/^ {2}(claude mcp add .*)$/gm)].map((m) => m[1])).toEqual([c.bridge.claudeMcpAdd, c.http.claudeMcpAdd]);
  });

  it('quotes a URL or name the shell would otherwise split', () => {
    const odd = connectInstructions({ mcpUrl: "https://h/mcp/a b'c", slug: SLUG, serverName: 'my server' });
    expect(odd.bridge.launch).toBe("claude --dangerously-load-development-channels server:'my server' --allowedTools mcp__my_server");
    expect(odd.http.claudeMcpAdd).toBe(`claude mcp add 'my server' --transport http --scope user 'https://h/mcp/a b'\\''c' --header "Authorization: Bearer $SWITCHBOARD_AGENT_TOKEN"`);
  });
});
