import { readFileSync } from 'node:fs';
import { describe, expect, it, vi } from 'vitest';
import { defaultDataDir, loadConfig } from '../config.ts';
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

describe("the README's Run it", () => {
  const runIt = source('README.md').split('\n## Run it\n')[1]!.split('\n## ')[0]!;

  it('says how to change the address, the port and the data dir, with variables src/config.ts reads', () => {
    const named = new Set(runIt.match(/\bSWITCHBOARD_[A-Z0-9_]*[A-Z0-9]\b/g));
    expect([...named]).toEqual(expect.arrayContaining(['SWITCHBOARD_LISTEN', 'SWITCHBOARD_DATA_DIR']));
    const real = CONFIG_VARIABLES.map((v) => v.name);
    expect([...named].filter((name) => !real.includes(name))).toEqual([]);
    // Its example command is a configuration the server takes, and does what it says.
    const example = /^((?:SWITCHBOARD_[A-Z_]+=\S+ )+)npm start$/m.exec(runIt);
    expect(example, 'an example `VAR=value ... npm start` line').not.toBeNull();
    const env = Object.fromEntries(example![1]!.trim().split(' ').map((kv) => kv.split('=') as [string, string]));
    const config = loadConfig(env);
    expect(`${config.listenHost}:${config.listenPort}`).toBe(env.SWITCHBOARD_LISTEN);
    expect(config.dataDir).toBe(env.SWITCHBOARD_DATA_DIR);
    expect(runIt).toContain(`default \`${loadConfig({}).listenHost}:${loadConfig({}).listenPort}\``);
  });

  it('names the default data dir as src/config.ts decides it, for root too', () => {
    const uid = vi.spyOn(process, 'getuid');
    try {
      uid.mockReturnValue(0);
      expect(runIt).toContain(`as root it\n  is \`${defaultDataDir({})}\``);
      uid.mockReturnValue(1000);
      expect(defaultDataDir({ XDG_DATA_HOME: '/xdg' })).toBe('/xdg/switchboard');
      expect(runIt).toContain('`$XDG_DATA_HOME/switchboard` when that is set');
      expect(defaultDataDir({})).toMatch(/\/\.local\/share\/switchboard$/);
      expect(runIt).toContain('`~/.local/share/switchboard`');
    } finally {
      uid.mockRestore();
    }
  });
});
