#!/usr/bin/env node
// The direction of imports under src/: surfaces -> services -> store -> domain, with lib/, web/
// and sessions/ as leaves (shared/DESIGN.md, "Shape of the code"). Prints every import that
// breaks it and every import cycle, and exits 1 when there is one. Test files and testkits are
// exempt from the layer rules (a test may set up rows through the store), not from cycles.
//
//   npx tsx scripts/check-architecture.ts [root]      (npm run check:architecture)
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** Which layer a source file (path relative to src/, '/' separators) belongs to. */
export function layerOf(rel: string): string {
  const top = rel.split('/')[0] ?? '';
  if (rel === 'app.ts' || rel === 'compose.ts' || rel === 'server.ts') return 'root';
  if (rel === 'config.ts') return 'config';
  if (['domain', 'lib', 'store', 'db', 'sessions', 'services', 'web'].includes(top)) return top;
  if (['api', 'ingest-http', 'oauth-http', 'mcp', 'board', 'cli'].includes(top)) return 'surface';
  return 'unknown';
}

/** Layers each layer may import (its own included). A surface may import only itself among surfaces. */
const ALLOWED: Record<string, string[]> = {
  domain: ['domain'],
  lib: ['lib', 'domain'],
  config: ['config', 'lib', 'domain'],
  db: ['db', 'lib', 'domain', 'config'],
  store: ['store', 'db', 'lib', 'domain'],
  sessions: ['sessions', 'lib', 'domain'],
  services: ['services', 'store', 'db', 'sessions', 'lib', 'domain', 'config'],
  web: ['web', 'lib', 'domain'],
  surface: ['surface', 'services', 'sessions', 'web', 'lib', 'domain', 'config'],
  root: ['root', 'surface', 'services', 'db', 'sessions', 'web', 'lib', 'domain', 'config'],
};

/** Packages a layer must not import: the database driver outside the store, HTTP below the surfaces. */
const FORBIDDEN_PACKAGES: Record<string, string[]> = {
  domain: ['fastify', 'postgres', 'pino'],
  store: ['fastify'],
  services: ['fastify'],
  sessions: ['fastify', 'postgres'],
  lib: ['postgres'],
  surface: ['postgres'],
  web: ['postgres'],
};

const isTestFile = (rel: string): boolean => /\.(test|testkit)\.ts$/.test(rel);

/** Exceptions, each with its reason. */
function exempt(fromRel: string, toRel: string): boolean {
  const from = fromRel.split('/');
  const to = toRel.split('/');
  // A surface imports only its own folder: the CLI may share the API's wire types, and
  // `switchboard serve` starts the composition root.
  if (layerOf(fromRel) === 'surface' && layerOf(toRel) === 'surface') {
    if (from[0] === to[0]) return true;
    return from[0] === 'cli' && toRel === 'api/wire.ts';
  }
  if (from[0] === 'cli' && (toRel === 'app.ts')) return true;
  return false;
}

function listSources(dir: string, base = dir, out: string[] = []): string[] {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) listSources(full, base, out);
    else if (entry.name.endsWith('.ts')) out.push(path.relative(base, full).split(path.sep).join('/'));
  }
  return out;
}

const IMPORT = /(?:^|[\s;])(?:import|export)\s+(?:type\s+)?(?:[^'";]*?\sfrom\s+)?['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/g;

/** The import specifiers of one file (static, re-exports and literal dynamic imports). */
export function importsOf(text: string): string[] {
  const out: string[] = [];
  const code = text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|[^:])\/\/.*$/gm, '$1');
  for (const m of code.matchAll(IMPORT)) out.push((m[1] ?? m[2])!);
  return out;
}

/** Every breach of the layer rules and every cycle in the tree at `srcDir`. */
export function checkArchitecture(srcDir: string): string[] {
  const files = listSources(srcDir);
  const known = new Set(files);
  const problems: string[] = [];
  const graph = new Map<string, string[]>();
  for (const rel of files) {
    const edges: string[] = [];
    graph.set(rel, edges);
    const fromLayer = layerOf(rel);
    const text = fs.readFileSync(path.join(srcDir, rel), 'utf8');
    for (const spec of importsOf(text)) {
      if (!spec.startsWith('.')) {
        const pkg = spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0];
        if (!isTestFile(rel) && (FORBIDDEN_PACKAGES[fromLayer] ?? []).includes(pkg!)) {
          problems.push(`${rel}: the ${fromLayer} layer must not import the package "${pkg}"`);
        }
        continue;
      }
      const target = path.posix.normalize(path.posix.join(path.posix.dirname(rel), spec));
      if (target.startsWith('..')) continue; // outside src/ (package.json, test support)
      if (!known.has(target)) continue;
      if (!isTestFile(target)) edges.push(target);
      if (isTestFile(rel)) continue;
      const toLayer = layerOf(target);
      if (fromLayer === 'unknown') problems.push(`${rel}: not in a known layer folder (see scripts/check-architecture.mjs)`);
      else if (!ALLOWED[fromLayer]!.includes(toLayer) && !exempt(rel, target)) {
        problems.push(`${rel} -> ${target}: the ${fromLayer} layer must not import the ${toLayer} layer`);
      } else if (fromLayer === 'surface' && toLayer === 'surface' && !exempt(rel, target)) {
        problems.push(`${rel} -> ${target}: a surface must not import another surface`);
      }
    }
  }
  for (const cycle of findCycles(graph)) problems.push(`import cycle: ${cycle.join(' -> ')}`);
  return [...new Set(problems)];
}

/** One representative cycle per strongly connected component (Tarjan). */
function findCycles(graph: Map<string, string[]>): string[][] {
  let index = 0;
  const stack: string[] = [];
  const onStack = new Set<string>();
  const idx = new Map<string, number>();
  const low = new Map<string, number>();
  const cycles: string[][] = [];
  const visit = (v: string): void => {
    idx.set(v, index);
    low.set(v, index++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!idx.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, idx.get(w)!));
    }
    if (low.get(v) === idx.get(v)) {
      const scc: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        scc.push(w);
      } while (w !== v);
      if (scc.length > 1) cycles.push(pathWithin(graph, new Set(scc), scc.sort()[0]!));
    }
  };
  for (const v of [...graph.keys()].sort()) if (!idx.has(v)) visit(v);
  return cycles;
}

/** A shortest cycle through `start` inside one component, for the message. */
function pathWithin(graph: Map<string, string[]>, members: Set<string>, start: string): string[] {
  const prev = new Map<string, string | null>([[start, null]]);
  const queue = [start];
  while (queue.length) {
    const v = queue.shift()!;
    for (const w of graph.get(v) ?? []) {
      if (!members.has(w)) continue;
      if (w === start) {
        const out = [start];
        for (let u = v; u !== start; u = prev.get(u)!) out.splice(1, 0, u);
        return [...out, start];
      }
      if (!prev.has(w)) {
        prev.set(w, v);
        queue.push(w);
      }
    }
  }
  return [start];
}

/** Prints the problems of the tree at `root` (default: this repository) and sets the exit code. */
export function runCli(rootArg?: string): void {
  const root = path.resolve(rootArg ?? path.join(path.dirname(fileURLToPath(import.meta.url)), '..'));
  const problems = checkArchitecture(path.join(root, 'src'));
  for (const p of problems) console.error(p);
  if (problems.length) {
    console.error(`\narchitecture check: ${problems.length} problem(s). Imports flow surfaces -> services -> store -> domain (README, "Architecture").`);
    process.exitCode = 1;
  } else console.log('architecture check: imports flow one way, no cycles');
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) runCli(process.argv[2]);
