/**
 * Issue 38 item 5: mount `oidc-provider` (a certified OAuth/OIDC server) or keep our own small
 * authorization server (src/services/oauth.ts)? This prints the figures the README's "Why our own
 * OAuth server" section quotes, all from one run:
 *
 *   - install: bytes on disk (allocated blocks and file sizes) and the packages an install pulls;
 *   - cold import: fresh `node` processes, each timing `await import(...)` inside itself and timed
 *     whole from outside; oidc-provider under plain node and under `--import tsx` (the loader
 *     ours runs under in development), ours under tsx with and without tsx's transform cache and
 *     compiled by tsc (as `npm run build` ships it) under plain node, and empty processes as the
 *     baseline; the configurations take turns, the first round is not counted, medians;
 *   - the ES modules each graph loads (CommonJS files they require are not counted), through a
 *     load hook in a separate process;
 *   - shape: a Provider on a node:http server with a recording storage adapter: the model kinds
 *     the adapter is asked for, the discovery document, the signing keys it publishes (JWKS), the
 *     fields a dynamic registration returns, and the cookies one authorization request sets.
 *
 * oidc-provider is never installed into this repository. Install it elsewhere and name the
 * directory (repeat --dir to compare versions); without one the oidc-provider half is skipped:
 *
 *   npm install --prefix /tmp/oidc-choice oidc-provider@8.8.1     (the last major supporting Node 20)
 *   npm run bench:oauth-choice -- --dir /tmp/oidc-choice [--dir /tmp/oidc-9] [--rounds 9] [--json]
 *   OIDC_PROVIDER_DIR=/tmp/oidc-choice npm run bench:oauth-choice
 */
import { spawn } from 'node:child_process';
import { existsSync, lstatSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const { values: args } = parseArgs({
  options: { dir: { type: 'string', multiple: true }, rounds: { type: 'string', default: '9' }, json: { type: 'boolean', default: false } },
});
const DIRS = (args.dir ?? (process.env.OIDC_PROVIDER_DIR ? [process.env.OIDC_PROVIDER_DIR] : [])).map((d) => path.resolve(d));
const ROUNDS = Math.max(2, Number(args.rounds));

/** Our authorization server: the files issue 38 added for it (the consent view and the grants API included). */
const OURS = [
  'src/services/oauth.ts',
  'src/oauth-http/routes.ts',
  'src/board/routes/oauth-consent.ts',
  'src/board/views/oauth-consent.ts',
  'src/api/grants.ts',
  'src/db/migrations/0024_oauth.sql',
  ...['src/domain/oauth', 'src/store/oauth'].flatMap((d) => readdirSync(path.join(ROOT, d)).filter((f) => !f.includes('.test.')).map((f) => `${d}/${f}`)),
];
const OURS_ENTRY = pathToFileURL(path.join(ROOT, 'src/services/oauth.ts')).href;
const providerEntry = (dir: string) => pathToFileURL(path.join(dir, 'node_modules/oidc-provider/lib/index.js')).href;

// ---------------------------------------------------------------------------------------------
// Install size: every package directory under node_modules (scoped and nested ones included).

function installFigures(dir: string): { packages: number; diskBytes: number; fileBytes: number; files: number } {
  let packages = 0, diskBytes = 0, fileBytes = 0, files = 0;
  const walk = (p: string, inNodeModules: boolean): void => {
    for (const entry of readdirSync(p, { withFileTypes: true })) {
      const full = path.join(p, entry.name);
      const st = lstatSync(full);
      diskBytes += st.blocks * 512;
      if (entry.isDirectory()) {
        if (inNodeModules && !entry.name.startsWith('@') && !entry.name.startsWith('.')) packages++;
        walk(full, entry.name === 'node_modules' || (inNodeModules && entry.name.startsWith('@')));
      } else {
        fileBytes += st.size;
        files++;
      }
    }
  };
  walk(path.join(dir, 'node_modules'), true);
  return { packages, diskBytes, fileBytes, files };
}

// ---------------------------------------------------------------------------------------------
// Child processes.

function run(argv: string[], env: Record<string, string> = {}): Promise<{ stdout: string; stderr: string; wallMs: number }> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(process.execPath, argv, { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '', stderr = '';
    child.stdout.on('data', (b: Buffer) => (stdout += b));
    child.stderr.on('data', (b: Buffer) => (stderr += b));
    child.on('error', reject);
    child.on('close', (code) => {
      const wallMs = performance.now() - t0;
      if (code !== 0) reject(new Error(`node ${argv.join(' ')} exited ${code}: ${stderr.slice(0, 500)}`));
      else resolve({ stdout, stderr, wallMs });
    });
  });
}

/** Times `import(target)` inside a fresh process; an empty target times nothing (the baseline). */
const IMPORT_TIMER = `const t = performance.now(); if (process.env.TARGET) await import(process.env.TARGET); process.stdout.write(String(performance.now() - t));`;

interface ImportConfig { label: string; argv: string[]; env: Record<string, string> }

/**
 * Our module graph compiled the way `npm run build` compiles src/ (tsc, .ts specifiers rewritten
 * to .js), into a scratch directory: the production figure, beside tsx's development one.
 */
async function compileOurs(): Promise<{ entry: string; dir: string }> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'oauth-choice-dist-'));
  const tsc = path.join(ROOT, 'node_modules/typescript/bin/tsc');
  await run([tsc, '--module', 'NodeNext', '--moduleResolution', 'NodeNext', '--target', 'ES2022', '--types', 'node', '--allowImportingTsExtensions',
    '--rewriteRelativeImportExtensions', '--verbatimModuleSyntax', '--skipLibCheck', '--noCheck', '--rootDir', 'src', '--outDir', dir, 'src/services/oauth.ts']);
  writeFileSync(path.join(dir, 'package.json'), '{"type":"module"}\n');
  symlinkSync(path.join(ROOT, 'node_modules'), path.join(dir, 'node_modules'));
  return { entry: pathToFileURL(path.join(dir, 'services/oauth.js')).href, dir };
}

function importConfigs(compiledEntry: string): ImportConfig[] {
  const tsx = ['--import', 'tsx'];
  const timer = ['--input-type=module', '-e', IMPORT_TIMER];
  const configs: ImportConfig[] = [
    { label: 'empty process: node', argv: timer, env: { TARGET: '' } },
    { label: 'empty process: node --import tsx', argv: [...tsx, ...timer], env: { TARGET: '' } },
    { label: 'ours: src/services/oauth.ts (tsx, transform cache warm)', argv: [...tsx, ...timer], env: { TARGET: OURS_ENTRY } },
    { label: 'ours: src/services/oauth.ts (tsx, TSX_DISABLE_CACHE=1)', argv: [...tsx, ...timer], env: { TARGET: OURS_ENTRY, TSX_DISABLE_CACHE: '1' } },
    { label: 'ours: compiled by tsc, as npm run build ships it: node', argv: timer, env: { TARGET: compiledEntry } },
  ];
  for (const dir of DIRS) {
    const v = providerVersion(dir);
    configs.push({ label: `oidc-provider ${v}: node`, argv: timer, env: { TARGET: providerEntry(dir) } });
    configs.push({ label: `oidc-provider ${v}: node --import tsx`, argv: [...tsx, ...timer], env: { TARGET: providerEntry(dir) } });
  }
  return configs;
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

async function importTimes(compiledEntry: string): Promise<{ label: string; importMs: number; wallMs: number }[]> {
  const configs = importConfigs(compiledEntry);
  const samples = configs.map(() => ({ importMs: [] as number[], wallMs: [] as number[] }));
  for (let round = 0; round < ROUNDS; round++) {
    // Each round starts at a different configuration, so none always runs first or last.
    for (let k = 0; k < configs.length; k++) {
      const i = (k + round) % configs.length;
      const out = await run(configs[i]!.argv, configs[i]!.env);
      if (round === 0) continue; // warm-up: page cache, tsx's transform cache
      samples[i]!.importMs.push(Number(out.stdout));
      samples[i]!.wallMs.push(out.wallMs);
    }
  }
  return configs.map((c, i) => ({ label: c.label, importMs: median(samples[i]!.importMs), wallMs: median(samples[i]!.wallMs) }));
}

/** A load hook that appends every module URL it loads to $MODULE_LOG: the ES module graph, counted. */
const COUNT_HOOK = `data:text/javascript,${encodeURIComponent(`import { register } from 'node:module'; register('data:text/javascript,' + encodeURIComponent("import { appendFileSync } from 'node:fs'; export async function load(url, ctx, next) { if (!url.startsWith('node:')) appendFileSync(process.env.MODULE_LOG, url + '\\\\n'); return next(url, ctx); }"));`)}`;

async function moduleGraph(target: string, tsx: boolean): Promise<{ modules: number; packages: Record<string, number> }> {
  const log = path.join(os.tmpdir(), `oauth-choice-modules-${process.pid}-${Date.now()}`);
  await run([...(tsx ? ['--import', 'tsx'] : []), '--import', COUNT_HOOK, '--input-type=module', '-e', IMPORT_TIMER], { TARGET: target, MODULE_LOG: log });
  const urls = readFileSync(log, 'utf8').trim().split('\n').filter(Boolean);
  const packages: Record<string, number> = {};
  for (const u of urls) {
    const m = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(u);
    const key = m ? m[1]! : 'own source';
    packages[key] = (packages[key] ?? 0) + 1;
  }
  return { modules: urls.length, packages };
}

// ---------------------------------------------------------------------------------------------
// Shape: what a mounted Provider asks of us and puts beside the board.

const SHAPE_PROBE = `
import http from 'node:http';
import { createHash, randomBytes } from 'node:crypto';
const { default: Provider } = await import(process.env.TARGET);
const kinds = new Set();
class Recording {
  constructor(name) { kinds.add(name); this.rows = new Map(); }
  async upsert(id, payload) { this.rows.set(id, payload); } async find(id) { return this.rows.get(id); }
  async findByUserCode() {} async findByUid() {} async consume() {} async destroy(id) { this.rows.delete(id); } async revokeByGrantId() {}
}
const provider = new Provider('http://127.0.0.1', { adapter: Recording, cookies: { keys: ['bench'] }, features: { registration: { enabled: true } } });
// Every model class the provider exposes builds its adapter when asked: that is the storage to write.
for (const k of Object.getOwnPropertyNames(Object.getPrototypeOf(provider))) {
  const M = /^[A-Z]/.test(k) ? provider[k] : undefined;
  try { if (M && 'adapter' in M) void M.adapter; } catch {}
}
await provider.Client.find('probe').catch(() => {});
kinds.delete('BaseToken');
const server = http.createServer(provider.callback()).listen(0, '127.0.0.1');
await new Promise((r) => server.once('listening', r));
const base = 'http://127.0.0.1:' + server.address().port;
const discovery = await (await fetch(base + '/.well-known/openid-configuration')).json();
const jwks = await (await fetch(discovery.jwks_uri)).json();
const redirect = 'http://127.0.0.1:9/cb';
const registered = await (await fetch(discovery.registration_endpoint, { method: 'POST', headers: { 'content-type': 'application/json' },
  body: JSON.stringify({ redirect_uris: [redirect], token_endpoint_auth_method: 'none', grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'] }) })).json();
const verifier = randomBytes(32).toString('base64url');
const q = new URLSearchParams({ client_id: registered.client_id, redirect_uri: redirect, response_type: 'code', scope: 'openid', state: 's',
  code_challenge: createHash('sha256').update(verifier).digest('base64url'), code_challenge_method: 'S256' });
const authorize = await fetch(discovery.authorization_endpoint + '?' + q, { redirect: 'manual' });
server.close();
console.log(JSON.stringify({
  // 9.x: the Provider is a Koa application; 8.x: it keeps one in a private field (its app getter).
  framework: (() => { const names = []; for (let o = provider.app ?? provider; o && o !== Object.prototype; o = Object.getPrototypeOf(o)) names.push(o.constructor.name); return [...new Set(names)].join(' < '); })(),
  adapterKinds: [...kinds].sort(),
  discoveryFields: Object.keys(discovery).length,
  jwks: jwks.keys.map((k) => k.kty + ' ' + k.alg),
  idTokenAlgs: discovery.id_token_signing_alg_values_supported,
  registrationFields: Object.keys(registered).length,
  registrationAccessToken: 'registration_access_token' in registered,
  authorizeStatus: authorize.status,
  authorizeLocation: (authorize.headers.get('location') ?? '').replace(/[^/]+$/, '<uid>'),
  cookies: authorize.headers.getSetCookie().map((c) => c.split('=')[0]),
}));
`;

interface Shape {
  framework: string;
  adapterKinds: string[];
  discoveryFields: number;
  jwks: string[];
  idTokenAlgs: string[];
  registrationFields: number;
  registrationAccessToken: boolean;
  authorizeStatus: number;
  authorizeLocation: string;
  cookies: string[];
  warnings: string[];
}

async function shape(dir: string): Promise<Shape> {
  const out = await run(['--input-type=module', '-e', SHAPE_PROBE], { TARGET: providerEntry(dir) });
  const warnings = out.stderr.split('\n').filter((l) => /WARNING/.test(l)).map((l) => l.replace(/^oidc-provider WARNING: /, ''));
  return { ...(JSON.parse(out.stdout.trim().split('\n').at(-1)!) as Omit<Shape, 'warnings'>), warnings };
}

function providerVersion(dir: string): string {
  return (JSON.parse(readFileSync(path.join(dir, 'node_modules/oidc-provider/package.json'), 'utf8')) as { version: string }).version;
}

const lineCount = (file: string) => readFileSync(path.join(ROOT, file), 'utf8').split('\n').length - 1;
const mib = (b: number) => `${(b / 1024 / 1024).toFixed(1)} MiB`;

async function main(): Promise<void> {
  const installed = DIRS.filter((d) => existsSync(path.join(d, 'node_modules/oidc-provider/package.json')));
  for (const d of DIRS.filter((x) => !installed.includes(x))) {
    console.log(`skipping ${d}: no node_modules/oidc-provider there (npm install --prefix ${d} oidc-provider@8.8.1)`);
  }
  DIRS.splice(0, DIRS.length, ...installed);
  if (DIRS.length === 0) console.log('oidc-provider: not measured (give --dir DIR or OIDC_PROVIDER_DIR=DIR, a directory where it is installed); our side only\n');

  const ours = { files: OURS.length, lines: OURS.reduce((n, f) => n + lineCount(f), 0) };
  const result: Record<string, unknown> = { node: process.version, cores: os.cpus().length, loadavg: os.loadavg()[0]!.toFixed(2), rounds: ROUNDS - 1, ours };
  console.log(`node ${process.version}, ${os.cpus().length} cores, load ${os.loadavg()[0]!.toFixed(2)}; ${ROUNDS - 1} counted rounds (medians)\n`);
  console.log(`ours: ${ours.files} files, ${ours.lines} lines (service, routes, consent page, grants API, store, domain rules, migration); no dependency added`);

  const providers: Record<string, unknown>[] = [];
  for (const dir of DIRS) {
    const v = providerVersion(dir);
    const inst = installFigures(dir);
    const graph = await moduleGraph(providerEntry(dir), false);
    const s = await shape(dir);
    providers.push({ version: v, dir, install: inst, graph, shape: s });
    console.log(`\noidc-provider ${v} (${dir})`);
    console.log(`  install: ${inst.packages} packages (itself and ${inst.packages - 1} more), ${mib(inst.diskBytes)} on disk, ${mib(inst.fileBytes)} in ${inst.files} files`);
    console.log(`  import: ${graph.modules} ES modules: ${Object.entries(graph.packages).sort((a, b) => b[1] - a[1]).map(([k, n]) => `${k} ${n}`).join(', ')}`);
    console.log(`  framework: ${s.framework} (Koa's class is Application); storage adapter asked for ${s.adapterKinds.length} model kinds: ${s.adapterKinds.join(', ')}`);
    console.log(`  discovery: ${s.discoveryFields} fields; JWKS: ${s.jwks.join(', ')}; ID token algs: ${s.idTokenAlgs.join(', ')}`);
    console.log(`  registration answer: ${s.registrationFields} fields${s.registrationAccessToken ? ', with a registration_access_token to store (RFC 7592)' : ''}`);
    console.log(`  one authorization request: ${s.authorizeStatus} to ${s.authorizeLocation}, cookies set: ${s.cookies.join(', ') || 'none'}`);
    for (const w of s.warnings) console.log(`  warning: ${w}`);
  }
  const ownGraph = await moduleGraph(OURS_ENTRY, true);
  console.log(`\nours: import: ${ownGraph.modules} ES modules: ${Object.entries(ownGraph.packages).map(([k, n]) => `${k} ${n}`).join(', ')}`);

  console.log('\ncold import, fresh process each (median ms): import() inside the process / the whole process from outside');
  const compiled = await compileOurs();
  const times = await importTimes(compiled.entry).finally(() => rmSync(compiled.dir, { recursive: true, force: true }));
  const width = Math.max(...times.map((t) => t.label.length));
  for (const t of times) console.log(`  ${t.label.padEnd(width)}  ${t.importMs.toFixed(1).padStart(7)}  ${t.wallMs.toFixed(1).padStart(7)}`);
  Object.assign(result, { providers, ownGraph, importTimes: times });
  if (args.json) console.log(JSON.stringify(result));
}

await main();
