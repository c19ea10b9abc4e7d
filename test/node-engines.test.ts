import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * The README promises Node 20: every installed package must accept the Node running the tests
 * (CI runs Node 20), so `npm ci` prints no engine warning. light-my-request (fastify's inject)
 * asks for cookie 2, which wants Node 22; package.json overrides it to cookie 1.1, the same API.
 */
// semver comes with npm's own tree (not a dependency of ours), so it is loaded untyped.
const semver = createRequire(import.meta.url)('semver') as { satisfies(version: string, range: string): boolean };

describe('the dependency tree', () => {
  it("accepts this Node version in every package's engines field", async () => {
    const lock = JSON.parse(await readFile(join(import.meta.dirname, '..', 'package-lock.json'), 'utf8')) as {
      packages: Record<string, { engines?: { node?: string } | string[] }>;
    };
    const refusing = Object.entries(lock.packages)
      .filter(([, p]) => p.engines && !Array.isArray(p.engines) && p.engines.node && !semver.satisfies(process.versions.node, p.engines.node))
      .map(([path, p]) => `${path} wants node ${(p.engines as { node: string }).node}`);
    expect(refusing).toEqual([]);
  });
});
