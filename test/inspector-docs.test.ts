import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiCaller, humanWithToken, migratedDatabase, startTestApp, vend, type TestApp, type TestDb, type Vended } from './support/fixtures.ts';
import { toolOrSkip } from './support/test-tools.ts';

// docs/connect.md says exactly which MCP Inspector to run against an endpoint, pinned. The lines it
// gives for Node.js 20 run here as written (the pinned package from npm, cached under
// node_modules/.cache/switchboard-test-tools, on this Node.js 20) against a test app, with the doc's
// $MCP_URL and $SWITCHBOARD_AGENT_TOKEN filled in; so do the two mistakes it warns about. The line
// for Node.js 22 is checked for its pins and for taking the same arguments: running it would fetch a
// second Node.js and the Inspector 2.x tree (some 300 MB) for one line, so it was run by hand.

const INSPECTOR = '@modelcontextprotocol/inspector';

/** The doc's Inspector section, and the `npx` lines of its shell blocks. */
const section = readFileSync(new URL('../docs/connect.md', import.meta.url), 'utf8').split('\n### Look at an endpoint with the MCP Inspector\n')[1]?.split('\n## ')[0] ?? '';
const npxLines = [...section.matchAll(/```sh\n([\s\S]*?)```/g)].flatMap((m) => m[1]!.split('\n')).filter((l) => l.startsWith('npx '));

/** Words of a shell line: split on spaces outside double quotes, the quotes dropped. */
function words(line: string): string[] {
  return [...line.matchAll(/"([^"]*)"|(\S+)/g)].map((m) => m[1] ?? m[2]!);
}

/** `npx -y <pkg>@<version> <args...>`: the Node.js 20 lines. */
const node20 = npxLines
  .map(words)
  .filter((w) => w[1] === '-y' && w[2]?.startsWith(`${INSPECTOR}@`))
  .map((w) => ({ version: w[2]!.slice(INSPECTOR.length + 1), args: w.slice(3) }));
const pinned = node20[0]?.version;

const inspectorDir = pinned && /^\d+\.\d+\.\d+$/.test(pinned) ? await toolOrSkip('inspector-docs', INSPECTOR, pinned) : null;

let db: TestDb;
let app: TestApp;
let e: Vended;
let home: string;

beforeAll(async () => {
  if (!inspectorDir) return;
  db = await migratedDatabase();
  app = await startTestApp(db.url);
  e = await vend(apiCaller(app.url, (await humanWithToken(db.sql)).token), { name: 'inspected', queues: ['reviews'] });
  home = await mkdtemp(join(tmpdir(), 'sb-inspector-docs-'));
});
afterAll(async () => {
  await app?.stop();
  await db?.drop();
  if (home) await rm(home, { recursive: true, force: true });
});

describe('docs/connect.md: the MCP Inspector lines', () => {
  it('pin every version: Inspector 1.0.x for Node.js 20, and Node.js >= 22.19 with Inspector 2.x taking the same arguments', () => {
    expect(node20.length, 'npx -y @modelcontextprotocol/inspector@X lines').toBeGreaterThanOrEqual(2);
    for (const line of node20) expect(line.version).toBe(pinned);
    expect(pinned).toMatch(/^1\.0\.\d+$/);
    const node22 = npxLines.map(words).filter((w) => w.includes('-p') && w.some((x) => x.startsWith('node@')));
    expect(node22).toHaveLength(1);
    const w = node22[0]!;
    const nodeVersion = w.find((x) => x.startsWith('node@'))!.slice('node@'.length);
    const [major, minor] = nodeVersion.split('.').map(Number);
    expect(nodeVersion).toMatch(/^\d+\.\d+\.\d+$/);
    expect(major! > 22 || (major === 22 && minor! >= 19)).toBe(true);
    expect(w.find((x) => x.startsWith(`${INSPECTOR}@`))).toMatch(/^@modelcontextprotocol\/inspector@2\.\d+\.\d+$/);
    expect(w.slice(w.indexOf('mcp-inspector') + 1)).toEqual(node20[0]!.args);
    // The unpinned command it warns against is not one it gives.
    expect(npxLines.map(words).every((x) => x.every((y) => y !== INSPECTOR))).toBe(true);
  });
});

describe.skipIf(!inspectorDir)(`docs/connect.md: ${INSPECTOR}@${pinned} on this Node.js ${process.version}`, () => {
  /** Runs the package's bin (what `npx -y <pkg>@<v>` runs) with the doc's variables filled in. */
  function inspector(args: string[]): Promise<{ code: number | null; out: string; err: string }> {
    const manifest = JSON.parse(readFileSync(join(inspectorDir!, 'package.json'), 'utf8')) as { bin: string | Record<string, string> };
    const bins = typeof manifest.bin === 'string' ? [manifest.bin] : Object.values(manifest.bin);
    expect(bins, 'npx runs the package\'s only bin').toHaveLength(1);
    const filled = args.map((a) => a.replaceAll('$MCP_URL', e.mcp_url).replaceAll('$SWITCHBOARD_AGENT_TOKEN', e.token));
    return new Promise((resolve) =>
      execFile(process.execPath, [join(inspectorDir!, bins[0]!), ...filled], { env: { PATH: process.env.PATH ?? '', HOME: home }, timeout: 30_000 }, (err, out, errOut) =>
        resolve({ code: err ? (typeof err.code === 'number' ? err.code : null) : 0, out, err: errOut }),
      ),
    );
  }
  const line = (method: string) => node20.find((l) => l.args.includes(method))!.args;

  it('tools/list and tools/call whoami, as written, answer with the endpoint the credential names', async () => {
    const listed = await inspector(line('tools/list'));
    expect(listed.code, listed.err).toBe(0);
    expect((JSON.parse(listed.out) as { tools: { name: string }[] }).tools.map((t) => t.name)).toEqual(expect.arrayContaining(['claim_next', 'complete', 'whoami']));
    const whoami = await inspector(line('tools/call'));
    expect(whoami.code, whoami.err).toBe(0);
    expect(JSON.parse(whoami.out)).toMatchObject({ structuredContent: { endpoint: { slug: e.slug, name: 'inspected' }, queues: ['reviews'] } });
  }, 60_000);

  it('fails as the doc warns without the header (401) and without --transport http (SSE, 400)', async () => {
    const args = line('tools/list');
    const noHeader = await inspector(args.slice(0, args.indexOf('--header')));
    expect(noHeader.code).not.toBe(0);
    expect(`${noHeader.out}${noHeader.err}`).toMatch(/Unauthorized: a valid endpoint credential/);
    const at = args.indexOf('--transport');
    const noTransport = await inspector([...args.slice(0, at), ...args.slice(at + 2)]);
    expect(noTransport.code).not.toBe(0);
    expect(`${noTransport.out}${noTransport.err}`).toMatch(/SSE error: Non-200 status code \(400\)/);
  }, 60_000);
});
