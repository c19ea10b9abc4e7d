import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, type TestContext } from 'vitest';
import { CLAUDE_CODE_VERSION, ensureClaudeCode, mcpListStatuses, runCommand, switchboardShimDir, type Ran } from './support/claude-code.ts';
import { apiCaller, humanWithToken, migratedDatabase, startTestApp, vend, type TestApp, type TestDb, type Vended } from './support/fixtures.ts';
import { SWITCHBOARD_BIN } from './support/processes.ts';

// The lines Switchboard prints for connecting Claude Code, run with the real Claude Code CLI
// (pinned, installed from npm into node_modules/.cache) rather than compared as strings: each
// `claude mcp add` line exactly as printed, through bash, then `claude mcp list`, which starts
// every configured server (the bridge through a `switchboard` on PATH that runs this checkout)
// and says whether it connected. The same for each printed .mcp.json, and for the hand-written
// copies in docs/connect.md and the README. Every run has its own HOME and project directory.

const ROOT = join(import.meta.dirname, '..');
/** The MCP URL docs/connect.md uses in its examples; the test puts the real one in its place. */
const DOC_URL = 'https://switchboard.example.com/mcp/review-bot-3fa91c0d';
/** The README's .mcp.json names the checkout and the URL with placeholders. */
const README_BIN = '/path/to/switchboard/bin/switchboard.js';
const README_URL = '<mcp_url>';
const CONNECTED = '✔ Connected';
/** A server added by its URL alone (docs/connect.md, "Connect by URL (OAuth)"): Claude Code waits for /mcp to authenticate. */
const NEEDS_AUTH = '! Needs authentication';

let db: TestDb;
let app: TestApp;
let endpoint: Vended;
let claude: string | undefined;
let unreachable: string | undefined;
let shimDir: string;
const scratch: string[] = [];

beforeAll(async () => {
  const [installed] = await Promise.all([
    ensureClaudeCode(),
    (async () => {
      db = await migratedDatabase();
      app = await startTestApp(db.url);
      const human = await humanWithToken(db.sql);
      // The real route: `connect` is exactly the text a user gets (the CLI prints the same).
      endpoint = await vend(apiCaller(app.url, human.token), { name: 'claude-code-lines', queues: ['reviews'] });
    })(),
  ]);
  if ('unreachable' in installed) {
    unreachable = `the npm registry is unreachable, so Claude Code ${CLAUDE_CODE_VERSION} could not be installed`;
    console.warn(`[claude-code-lines] every test here is skipped: ${unreachable}\n${installed.unreachable}`);
  } else claude = installed.bin;
  shimDir = await switchboardShimDir();
  scratch.push(shimDir);
}, 360_000);

afterAll(async () => {
  await app?.stop();
  await db?.drop();
  await Promise.all(scratch.map((d) => rm(d, { recursive: true, force: true })));
});

/** The CLI, or a skipped test that says why: only an unreachable npm registry skips. */
function claudeOrSkip(ctx: TestContext): string {
  if (claude) return claude;
  console.warn(`[claude-code-lines] skipped "${ctx.task.name}": ${unreachable}`);
  return ctx.skip(unreachable);
}

async function tempDir(prefix: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  scratch.push(dir);
  return dir;
}

/** A throwaway HOME and project directory, and the environment a user's shell would give claude. */
async function workspace(cli: string, opts: { approveProjectServers?: boolean } = {}) {
  const home = await tempDir('sb-cc-home-');
  const project = await tempDir('sb-cc-project-');
  if (opts.approveProjectServers) {
    // Claude Code 2.1.332 lists a project's .mcp.json servers as "⏸ Pending approval (run `claude`
    // to approve)" and does not start them until someone approves them in an interactive session;
    // this user setting approves every project server up front, as that answer would.
    await mkdir(join(home, '.claude'));
    await writeFile(join(home, '.claude', 'settings.json'), JSON.stringify({ enableAllProjectMcpServers: true }));
  }
  const env: NodeJS.ProcessEnv = {
    HOME: home,
    // `switchboard` is this checkout (the shim), `claude` the pinned CLI; the rest is the system's.
    PATH: [shimDir, dirname(cli), process.env.PATH].join(':'),
    SWITCHBOARD_AGENT_TOKEN: endpoint.token,
    // No telemetry, error reports or update checks from the throwaway installs.
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
  };
  const show = (what: string, r: Ran) => `${what} exited ${r.code}\n--- stdout\n${r.stdout}\n--- stderr\n${r.stderr}`;
  return {
    home,
    project,
    env,
    /** A printed line, exactly as printed, through bash in the project directory. */
    async bash(line: string) {
      const r = await runCommand('bash', ['-c', line], { env, cwd: project, timeoutMs: 60_000 });
      expect(r.code, show(line, r)).toBe(0);
      return r;
    },
    /** `claude mcp list` in the project directory: each server's status, by name. */
    async list() {
      // The app's clock is a manual one, so its per-endpoint MCP rate limit (a burst of 40) never
      // refills by itself; the seconds between a user's commands would refill it, so they pass here.
      app.clock.advance(10_000);
      const r = await runCommand(cli, ['mcp', 'list'], { env, cwd: project, timeoutMs: 90_000 });
      expect(r.code, show('claude mcp list', r)).toBe(0);
      return { statuses: Object.fromEntries(mcpListStatuses(r.stdout)), output: show('claude mcp list', r) };
    },
  };
}

/** Runs a `claude mcp add` line in a HOME of its own and requires `name` (and nothing else) connected. */
async function addAndConnect(cli: string, line: string, name: string) {
  const ws = await workspace(cli);
  await ws.bash(line);
  const { statuses, output } = await ws.list();
  expect(statuses, `${line}\n${output}`).toEqual({ [name]: CONNECTED });
}

/** Writes an .mcp.json, byte for byte, into a project of its own and requires `name` (and nothing else) connected. */
async function projectConnects(cli: string, mcpJson: string, name: string) {
  const ws = await workspace(cli, { approveProjectServers: true });
  await writeFile(join(ws.project, '.mcp.json'), mcpJson);
  const { statuses, output } = await ws.list();
  expect(statuses, `${mcpJson}\n${output}`).toEqual({ [name]: CONNECTED });
}

/**
 * Runs a URL-only line or .mcp.json (no header): Claude Code met the 401 with its resource_metadata
 * and lists the server as waiting for authentication (the browser step, /mcp, is interactive).
 */
async function needsAuthentication(cli: string, how: { line: string } | { mcpJson: string }) {
  const ws = await workspace(cli, { approveProjectServers: 'mcpJson' in how });
  if ('line' in how) await ws.bash(how.line);
  else await writeFile(join(ws.project, '.mcp.json'), how.mcpJson);
  const { statuses, output } = await ws.list();
  expect(Object.keys(statuses), output).toEqual(['switchboard']);
  expect(statuses['switchboard'], output).toBe(NEEDS_AUTH);
}

/** A direct HTTP line or entry that sends no credential: the "Connect by URL (OAuth)" ones. */
const byUrlAlone = (s: string) => (s.includes('--transport http') && !s.includes('--header')) || (s.includes('"type": "http"') && !s.includes('"headers"'));

/** Fenced code blocks of one language in a Markdown file. */
const fenced = (md: string, lang: string) => [...md.matchAll(/^```(\w*)\n([\s\S]*?)^```$/gm)].filter((m) => m[1] === lang).map((m) => m[2]!);

/** The commands of a shell block: a line ending in `\` continues on the next, kept as written. */
function shellCommands(block: string): string[] {
  const commands: string[] = [];
  let current: string[] = [];
  for (const line of block.split('\n')) {
    if (current.length === 0 && line.trim() === '') continue;
    current.push(line);
    if (!line.endsWith('\\')) {
      commands.push(current.join('\n'));
      current = [];
    }
  }
  if (current.length) commands.push(current.join('\n'));
  return commands;
}

/**
 * The launch line must get past Claude Code's option parsing. Started with no terminal and no
 * input, 2.1.332 takes it as a print-mode run and stops for want of a prompt, which it says only
 * after every option parsed; an unknown option or a flag without its value stops it earlier, with
 * its own error. (A real launch needs a claude.ai login, which a test does not have.)
 */
async function launchLineParses(cli: string, line: string) {
  const ws = await workspace(cli);
  const r = await runCommand('bash', ['-c', line], { env: ws.env, cwd: ws.project, timeoutMs: 60_000 });
  const said = `${line}\nexited ${r.code}\n--- stdout\n${r.stdout}\n--- stderr\n${r.stderr}`;
  expect(r.stderr, said).not.toMatch(/unknown option|argument missing|^error: /m);
  expect(r.stderr, said).toContain('Input must be provided either through stdin or as a prompt argument when using --print');
}

describe(`the printed lines, with the real Claude Code ${CLAUDE_CODE_VERSION}`, { timeout: 240_000 }, () => {
  it('POST /api/v1/endpoints: each claude mcp add line connects, in a HOME of its own', async (ctx) => {
    const cli = claudeOrSkip(ctx);
    const name = /server name "([^"]+)"/.exec(endpoint.connect)![1]!;
    const lines = [...endpoint.connect.matchAll(/^ {2}(claude mcp add .*)$/gm)].map((m) => m[1]!);
    expect(lines, endpoint.connect).toHaveLength(2);
    expect(lines[0]).toContain(' -- switchboard bridge --url ');
    expect(lines[1]).toContain(' --transport http ');
    // Both lines add the same name (the route takes no other), so each runs in a HOME of its own.
    for (const line of lines) await addAndConnect(cli, line, name);
  });

  it('POST /api/v1/endpoints: each .mcp.json connects, in a project of its own', async (ctx) => {
    const cli = claudeOrSkip(ctx);
    const name = /server name "([^"]+)"/.exec(endpoint.connect)![1]!;
    const blocks = [...endpoint.connect.matchAll(/^ {2}\{\n[\s\S]*?\n {2}\}$/gm)].map((m) => m[0]);
    expect(blocks, endpoint.connect).toHaveLength(2);
    expect(blocks.map((b) => JSON.parse(b))).toEqual([endpoint.mcp_json_bridge, endpoint.mcp_json]);
    for (const block of blocks) await projectConnects(cli, block, name);
  });

  it('a connection with a credential the server refuses is not reported connected', async (ctx) => {
    // What makes "✔ Connected" above worth something: it needs the server's answer, token included.
    const cli = claudeOrSkip(ctx);
    const ws = await workspace(cli, { approveProjectServers: true });
    ws.env.SWITCHBOARD_AGENT_TOKEN = 'sbk_' + 'x'.repeat(43);
    const block = [...endpoint.connect.matchAll(/^ {2}\{\n[\s\S]*?\n {2}\}$/gm)].map((m) => m[0]).find((b) => b.includes('"type": "http"'))!;
    await writeFile(join(ws.project, '.mcp.json'), block);
    const { statuses, output } = await ws.list();
    expect(Object.keys(statuses), output).toEqual(['switchboard']);
    expect(statuses['switchboard'], output).toMatch(/^✘ Failed to connect .*\(HTTP 401\)/);
  });

  it('docs/connect.md: each claude mcp add command and each .mcp.json connects, with the real MCP URL', async (ctx) => {
    const cli = claudeOrSkip(ctx);
    const md = await readFile(join(ROOT, 'docs', 'connect.md'), 'utf8');
    const real = (s: string) => {
      expect(s).toContain(DOC_URL);
      return s.replaceAll(DOC_URL, endpoint.mcp_url);
    };
    const adds = fenced(md, 'sh').flatMap(shellCommands).filter((c) => c.startsWith('claude mcp add ') && !byUrlAlone(c));
    expect(adds.length, 'claude mcp add commands in docs/connect.md').toBeGreaterThanOrEqual(2);
    expect(adds.some((c) => c.includes('--transport stdio')) && adds.some((c) => c.includes('--transport http'))).toBe(true);
    for (const command of adds) await addAndConnect(cli, real(command), 'switchboard');
    const files = fenced(md, 'json').filter((b) => b.includes('"mcpServers"') && !byUrlAlone(b));
    expect(files.length, '.mcp.json blocks in docs/connect.md').toBeGreaterThanOrEqual(2);
    for (const file of files) await projectConnects(cli, real(file), 'switchboard');
  });

  it('docs/connect.md, "Connect by URL (OAuth)": the URL-only line and .mcp.json wait for authentication', async (ctx) => {
    const cli = claudeOrSkip(ctx);
    const md = await readFile(join(ROOT, 'docs', 'connect.md'), 'utf8');
    const section = md.split('\n## Connect by URL (OAuth)\n')[1]!.split('\n## ')[0]!;
    const lines = fenced(section, 'sh').flatMap(shellCommands).filter((c) => c.startsWith('claude mcp add '));
    const files = fenced(section, 'json').filter((b) => b.includes('"mcpServers"'));
    expect([lines.length, files.length], 'one claude mcp add line and one .mcp.json in the section').toEqual([1, 1]);
    // Every URL-only snippet in the guide is in this section, and each of them sends no credential.
    expect([...fenced(md, 'sh').flatMap(shellCommands), ...fenced(md, 'json')].filter(byUrlAlone)).toEqual([...lines, ...files]);
    for (const s of [...lines, ...files]) expect(s).not.toMatch(/Authorization|SWITCHBOARD_AGENT_TOKEN|sbk_/);
    const real = (s: string) => {
      expect(s).toContain(DOC_URL);
      return s.replaceAll(DOC_URL, endpoint.mcp_url);
    };
    await needsAuthentication(cli, { line: real(lines[0]!) });
    await needsAuthentication(cli, { mcpJson: real(files[0]!) });
  });

  it("the README's .mcp.json (node and this checkout's bin/switchboard.js) connects", async (ctx) => {
    const cli = claudeOrSkip(ctx);
    const md = await readFile(join(ROOT, 'README.md'), 'utf8');
    const files = fenced(md, 'json').filter((b) => b.includes('"mcpServers"'));
    expect(files.length, '.mcp.json blocks in README.md').toBeGreaterThanOrEqual(1);
    for (const file of files) {
      expect(file).toContain(README_BIN);
      expect(file).toContain(README_URL);
      await projectConnects(cli, file.replaceAll(README_BIN, SWITCHBOARD_BIN).replaceAll(README_URL, endpoint.mcp_url), 'switchboard');
    }
  });

  it('the launch line is one line everywhere, and its flags parse', async (ctx) => {
    const cli = claudeOrSkip(ctx);
    const printed = /^ {2}(claude --dangerously-load-development-channels .*)$/m.exec(endpoint.connect)![1]!;
    const docs = await readFile(join(ROOT, 'docs', 'connect.md'), 'utf8');
    const readme = await readFile(join(ROOT, 'README.md'), 'utf8');
    const written = [
      ...fenced(docs, 'sh').flatMap(shellCommands),
      ...[...readme.matchAll(/`(claude [^`]*)`/g)].map((m) => m[1]!),
    ].filter((c) => c.startsWith('claude --dangerously-load-development-channels '));
    expect(written.length, 'launch lines in docs/connect.md and README.md').toBeGreaterThanOrEqual(3);
    expect(new Set(written)).toEqual(new Set([printed]));
    const help = await runCommand(cli, ['--help'], { env: (await workspace(cli)).env });
    expect(help.stdout).toContain('--allowedTools');
    await launchLineParses(cli, printed);
  });
});
