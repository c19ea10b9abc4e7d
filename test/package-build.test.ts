import { execFile } from 'node:child_process';
import { readdir, readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { VERSION } from '../src/lib/version.ts';
import { createTestDatabase, type TestDatabase } from './support/database.ts';
import { spawnServe, stopAllServes } from './support/processes.ts';

/**
 * The installable package runs the JavaScript build on plain Node, with no TypeScript loader:
 * `npm run build` compiles src/ (here into a scratch directory beside dist/, so the running suite
 * never sees dist/ change), and the compiled CLI answers and serves. `npm pack` ships that build
 * (package.json `files`), and the checkout keeps running the sources through tsx.
 */
const run = promisify(execFile);
const root = fileURLToPath(new URL('..', import.meta.url));
const outDirName = `.build-test-${process.pid}`;
const outDir = path.join(root, outDirName);
/** `node -e` running the compiled CLI's main, as bin/switchboard.js does for an installed package. */
const compiledMain = (...args: string[]) => [
  '--enable-source-maps',
  '--input-type=module',
  '-e',
  `const { main } = await import(${JSON.stringify(path.join(outDir, 'cli/main.js'))}); process.exitCode = await main(['node', 'switchboard', ...process.argv.slice(1)]);`,
  '--',
  ...args,
];

let db: TestDatabase;

beforeAll(async () => {
  const [database] = await Promise.all([createTestDatabase(), run(process.execPath, ['scripts/build.mjs', '--out-dir', outDirName], { cwd: root })]);
  db = database;
}, 180_000);

afterAll(async () => {
  await stopAllServes();
  await db?.drop();
  await rm(outDir, { recursive: true, force: true });
});

describe('npm run build', () => {
  it('writes JavaScript with source maps, the migrations and the board assets, and no tests', async () => {
    const files = (await readdir(outDir, { recursive: true })).map((f) => f.split(path.sep).join('/'));
    expect(files).toContain('cli/main.js');
    expect(files).toContain('cli/main.js.map');
    expect(files).toContain('db/migrations/0001_init.sql');
    expect(files.some((f) => f.startsWith('board/static/'))).toBe(true);
    expect(files.filter((f) => f.endsWith('.ts'))).toEqual([]);
    expect(files.filter((f) => /\.test\.js$/.test(f))).toEqual([]);
    // Every relative import was rewritten to .js: plain Node cannot load a .ts specifier.
    const main = await readFile(path.join(outDir, 'cli/main.js'), 'utf8');
    expect(main).not.toMatch(/from '\.{1,2}\/[^']*\.ts'/);
  });

  it('gives a CLI that runs on plain Node: --version', async () => {
    const { stdout } = await run(process.execPath, compiledMain('--version'), { cwd: root });
    expect(stdout.trim()).toBe(VERSION);
  });

  it('gives a server that runs on plain Node and is ready', async () => {
    const serve = await spawnServe({ databaseUrl: db.url, command: [process.execPath, ...compiledMain('serve')] });
    const res = await fetch(`${serve.url}/readyz`);
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ ready: true });
    expect(serve.output()).not.toContain('tsx');
  });
});

describe('package.json', () => {
  it('is scoped, ships the build and not the sources, and builds before packing', async () => {
    const pkg = JSON.parse(await readFile(path.join(root, 'package.json'), 'utf8')) as {
      name: string;
      files: string[];
      scripts: Record<string, string>;
      dependencies: Record<string, string>;
    };
    expect(pkg.name).toMatch(/^@[a-z0-9-]+\/switchboard$/);
    expect(pkg.files).toContain('dist/');
    expect(pkg.files.some((f) => f.startsWith('src'))).toBe(false);
    expect(pkg.scripts.prepack).toBe('npm run build');
    // The installed package runs dist/: a TypeScript loader there would be dead weight.
    expect(pkg.dependencies).not.toHaveProperty('tsx');
  });
});
