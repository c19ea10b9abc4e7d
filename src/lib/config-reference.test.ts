import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CONFIG_VARIABLES } from './config-reference.ts';

const source = (path: string) => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8');

/** The README's configuration table: variable name to its Default cell, backticks dropped. */
function readmeTable(): Map<string, string> {
  const section = source('README.md').split('\n## Configuration\n')[1]!.split('\n## ')[0]!;
  const rows = new Map<string, string>();
  for (const m of section.matchAll(/^\| `([A-Z_]+)` \| (.*?) \| .* \|$/gm)) rows.set(m[1]!, m[2]!.replace(/`/g, ''));
  return rows;
}

describe('the environment variable reference (serve --help)', () => {
  it('has every SWITCHBOARD_* variable src/config.ts reads, so a new one cannot be left out', () => {
    const read = new Set(source('src/config.ts').match(/\bSWITCHBOARD_[A-Z0-9_]*[A-Z0-9]\b/g));
    expect(read.size).toBeGreaterThan(15);
    const listed = CONFIG_VARIABLES.map((v) => v.name);
    expect([...read].filter((name) => !listed.includes(name))).toEqual([]);
    expect(listed).toContain('DATABASE_URL');
    expect(new Set(listed).size).toBe(listed.length);
    for (const v of CONFIG_VARIABLES) expect(v.description, v.name).not.toMatch(/\n/);
  });

  it("agrees with the README's configuration table: the same variables with the same defaults", () => {
    const readme = readmeTable();
    expect(readme.size).toBeGreaterThan(15);
    expect(Object.fromEntries(readme)).toEqual(Object.fromEntries(CONFIG_VARIABLES.map((v) => [v.name, v.default])));
  });
});
