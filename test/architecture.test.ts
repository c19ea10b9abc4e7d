import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { checkArchitecture, importsOf, layerOf } from '../scripts/check-architecture.ts';

const SRC = fileURLToPath(new URL('../src/', import.meta.url));
const trees: string[] = [];

/** A throwaway src/ tree: relative path -> file text. */
function tree(files: Record<string, string>): string {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'sb-arch-'));
  trees.push(root);
  for (const [rel, text] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(root, rel)), { recursive: true });
    fs.writeFileSync(path.join(root, rel), text);
  }
  return root;
}

afterEach(() => {
  for (const root of trees.splice(0)) fs.rmSync(root, { recursive: true, force: true });
});

describe('checkArchitecture', () => {
  it('passes on this repository: imports flow one way and nothing imports in a circle', () => {
    expect(checkArchitecture(SRC)).toEqual([]);
  });

  it('passes on a tree that follows the direction', () => {
    const root = tree({
      'domain/rule.ts': 'export const rule = 1;\n',
      'store/rows.ts': "import { rule } from '../domain/rule.ts';\nexport const rows = rule;\n",
      'services/work.ts': "import { rows } from '../store/rows.ts';\nexport const work = rows;\n",
      'api/routes.ts': "import { work } from '../services/work.ts';\nimport type { FastifyInstance } from 'fastify';\nexport const routes = work;\n",
    });
    expect(checkArchitecture(root)).toEqual([]);
  });

  it('fails when a surface imports the store', () => {
    const root = tree({
      'store/rows.ts': 'export const rows = 1;\n',
      'api/routes.ts': "import { rows } from '../store/rows.ts';\nexport const routes = rows;\n",
    });
    expect(checkArchitecture(root)).toEqual(['api/routes.ts -> store/rows.ts: the surface layer must not import the store layer']);
  });

  it('fails when a surface imports the database, even for a type', () => {
    const root = tree({
      'db/connect.ts': 'export type Sql = unknown;\n',
      'board/page.ts': "import type { Sql } from '../db/connect.ts';\nexport type Page = Sql;\n",
    });
    expect(checkArchitecture(root)).toEqual(['board/page.ts -> db/connect.ts: the surface layer must not import the db layer']);
  });

  it('fails when the store imports fastify or the domain imports the store', () => {
    const root = tree({
      'store/rows.ts': "import Fastify from 'fastify';\nexport const rows = Fastify;\n",
      'domain/rule.ts': "import { rows } from '../store/rows.ts';\nexport const rule = rows;\n",
    });
    expect(checkArchitecture(root).sort()).toEqual([
      'domain/rule.ts -> store/rows.ts: the domain layer must not import the store layer',
      'store/rows.ts: the store layer must not import the package "fastify"',
    ]);
  });

  it('fails when the composition root imports the store: server.ts reaches the database through a service (readiness)', () => {
    const root = tree({
      'store/health.ts': 'export const ping = 1;\n',
      'server.ts': "import { ping } from './store/health.ts';\nexport const server = ping;\n",
    });
    expect(checkArchitecture(root)).toEqual(['server.ts -> store/health.ts: the root layer must not import the store layer']);
  });

  it('fails when one surface imports another (the CLI may read only the API wire types)', () => {
    const root = tree({
      'api/wire.ts': 'export type EndpointView = { id: string };\n',
      'api/routes.ts': 'export const routes = 1;\n',
      'cli/endpoint.ts': "import type { EndpointView } from '../api/wire.ts';\nexport type View = EndpointView;\n",
      'board/routes.ts': "import { routes } from '../api/routes.ts';\nexport const board = routes;\n",
    });
    expect(checkArchitecture(root)).toEqual(['board/routes.ts -> api/routes.ts: a surface must not import another surface']);
  });

  it('fails on an import cycle and names it', () => {
    const root = tree({
      'store/a.ts': "import { b } from './b.ts';\nexport const a = () => b;\n",
      'store/b.ts': "import { a } from './a.ts';\nexport const b = () => a;\n",
    });
    expect(checkArchitecture(root)).toEqual(['import cycle: store/a.ts -> store/b.ts -> store/a.ts']);
  });

  it('lets a test file import any layer, but not hide a breach behind a comment', () => {
    const root = tree({
      'store/rows.ts': 'export const rows = 1;\n',
      'api/routes.test.ts': "import { rows } from '../store/rows.ts';\nexport const t = rows;\n",
      'api/routes.ts': "// import { rows } from '../store/rows.ts';\nexport const routes = 1;\n",
    });
    expect(checkArchitecture(root)).toEqual([]);
  });
});

describe('importsOf', () => {
  it('reads static, type-only, re-export and dynamic imports', () => {
    const text = [
      "import { a } from './a.ts';",
      "import type { B } from '../b.ts';",
      "export { c } from './c.ts';",
      "import './side-effect.ts';",
      "const d = await import('./d.ts');",
      "import {\n  e,\n  f,\n} from './ef.ts';",
    ].join('\n');
    expect(importsOf(text)).toEqual(['./a.ts', '../b.ts', './c.ts', './side-effect.ts', './d.ts', './ef.ts']);
  });
});

describe('layerOf', () => {
  it('names the layer of a path under src/', () => {
    expect(['app.ts', 'config.ts', 'domain/errors.ts', 'store/todos/claim.ts', 'mcp/transport.ts', 'cli/main.ts'].map(layerOf)).toEqual([
      'root',
      'config',
      'domain',
      'store',
      'surface',
      'surface',
    ]);
  });
});
