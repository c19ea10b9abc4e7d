import { AGENT_TOKEN_ENV, type ConnectInstructions } from '../../domain/connect-instructions.ts';
import { Html, html, join } from '../html.ts';

/** `code`-quoted words of a connect note as <code>; everything else escaped text. */
function note(text: string): Html {
  return join(text.split(/`([^`]+)`/).map((part, i) => (i % 2 === 1 ? html`<code>${part}</code>` : part)));
}

const notes = (lines: string[]) => html`<ul class="hints">${lines.map((l) => html`<li>${note(l)}</li>`)}</ul>`;

/**
 * The vend result's credential and connect instructions (domain/connect-instructions.ts): the
 * credential once, as the export line, and snippets that only name ${SWITCHBOARD_AGENT_TOKEN}.
 */
export function connectSection(c: ConnectInstructions, credential: string): Html {
  const json = (v: unknown) => JSON.stringify(v, null, 2);
  return html`<h2>Credential</h2>
<p>Export it in the shell that starts the agent:</p>
<pre id="export-token" class="copy">export ${AGENT_TOKEN_ENV}=<span id="credential" class="secret">${credential}</span></pre>
<p>${note(c.credentialNote)}</p>
<h2>Claude Code through the bridge: tools and doorbells</h2>
<p>In the agent's project <code>.mcp.json</code>:</p>
<pre id="mcp-json-bridge" class="copy">${json(c.bridge.mcpJson)}</pre>
<p>Or for your user:</p>
<pre id="claude-mcp-add-bridge" class="copy">${c.bridge.claudeMcpAdd}</pre>
<p>Then start Claude Code with the channel named:</p>
<pre id="launch" class="copy">${c.bridge.launch}</pre>
${notes(c.bridge.notes)}
<h2>Claude Code directly over HTTP: tools</h2>
<p>In the agent's project <code>.mcp.json</code>:</p>
<pre id="mcp-json" class="copy">${json(c.http.mcpJson)}</pre>
<p>Or for your user:</p>
<pre id="claude-mcp-add" class="copy">${c.http.claudeMcpAdd}</pre>
${notes(c.http.notes)}
<h2>Other clients</h2>
${notes([...c.withoutChannels, c.check])}
<p>The <a href="${c.guideUrl}">connect guide</a> has every client and what to do when no doorbell arrives.</p>`;
}
