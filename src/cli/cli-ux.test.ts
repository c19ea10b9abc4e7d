import { spawn } from 'node:child_process';
import { statSync } from 'node:fs';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { apiCaller, humanWithToken, migratedDatabase, startTestApp } from '../../test/support/app.ts';
import { vend, type TestApp, type Vended } from '../../test/support/fixtures.ts';
import { revokeToken } from '../store/humans.ts';
import { CONFIG_VARIABLES } from '../lib/config-reference.ts';
import { VERSION } from '../lib/version.ts';

// The command as people run it: `node bin/switchboard.js ...` in its own process against a real
// server, each case asserting the exit code and the message (issue 19 item 8). Every run starts
// Node and tsx afresh, a second or more each on a busy machine: hence the longer timeout.
vi.setConfig({ testTimeout: 60_000 });

let db: Awaited<ReturnType<typeof migratedDatabase>>;
let app: TestApp;
let home: string;
let token: string;
let handle: string;
let bot: Vended;
let env: Record<string, string>;

beforeAll(async () => {
  db = await migratedDatabase();
  app = await startTestApp(db.url);
  home = await mkdtemp(join(tmpdir(), 'sbcli-ux-'));
  ({ token, handle } = await humanWithToken(db.sql));
  env = { SWITCHBOARD_URL: app.url, SWITCHBOARD_TOKEN: token };
  bot = await vend(apiCaller(app.url, token), { name: 'review-bot', queues: ['reviews'] });
});
afterAll(async () => {
  await app.stop();
  await db.drop();
});

interface Run {
  code: number;
  out: string;
  err: string;
}

/** Spawns the real command with only the environment given (no SWITCHBOARD_* leaks in from the runner). */
function cli(args: string[], extraEnv: Record<string, string> = {}, stdin = ''): Promise<Run> {
  const env = { PATH: process.env.PATH, HOME: home, XDG_CONFIG_HOME: join(home, '.config'), NO_COLOR: '1', ...extraEnv };
  return run(process.execPath, ['bin/switchboard.js', ...args], env, stdin);
}

async function closedPort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const port = (srv.address() as { port: number }).port;
  await new Promise((r) => srv.close(r));
  return port;
}

describe('--version', () => {
  it('prints the version for --version, -v and the old -V, exit 0', async () => {
    const runs = await Promise.all([cli(['--version']), cli(['-v']), cli(['-V'])]);
    for (const r of runs) expect(r).toEqual({ code: 0, out: `${VERSION}\n`, err: '' });
  });
});

describe('switchboard login --with-token and auth status', () => {
  it('reads the token from stdin, saves it, and auth status names the URL, the human and the file', async () => {
    const creds = join(home, 'login-creds.json');
    const login = await cli(['login', '--url', `${app.url}/api/v1/`, '--with-token'], { SWITCHBOARD_CREDENTIALS: creds }, `${token}\n`);
    expect(login.err).toBe('');
    expect(login).toMatchObject({ code: 0, out: `Logged in to ${app.url} as ${handle}; credentials saved in ${creds}.\n` });
    expect(JSON.parse(await readFile(creds, 'utf8'))).toEqual({ url: app.url, token });

    const [fromFile, fromEnv, json] = await Promise.all([
      cli(['auth', 'status'], { SWITCHBOARD_CREDENTIALS: creds }),
      cli(['auth', 'status'], { ...env, SWITCHBOARD_CREDENTIALS: creds }),
      cli(['auth', 'status', '--json'], { SWITCHBOARD_CREDENTIALS: creds, SWITCHBOARD_URL: app.url }),
    ]);
    expect(fromFile).toMatchObject({ code: 0, err: '' });
    expect(fromFile.out).toBe(`Logged in to ${app.url} as ${handle}.\n  URL    from ${creds}\n  Token  ${token.slice(0, 12)}… from ${creds}\n`);
    expect(fromEnv.out).toContain('  URL    from SWITCHBOARD_URL\n');
    expect(fromEnv.out).toContain(`  Token  ${token.slice(0, 12)}… from SWITCHBOARD_TOKEN\n`);
    expect(JSON.parse(json.out)).toMatchObject({ logged_in: true, url: app.url, url_from: 'SWITCHBOARD_URL', token_from: creds, human: { handle } });
    expect(json.out).not.toContain(token);
  });

  it('keeps --token; refuses both, --no-browser with a token, an empty stdin and an sbk_ credential as usage mistakes (2)', async () => {
    const creds = { SWITCHBOARD_CREDENTIALS: join(home, 'login-token.json') };
    // Neither flag is the browser login (login-browser.test.ts).
    const [flag, both, noBrowser, empty, endpointCredential] = await Promise.all([
      cli(['login', '--url', app.url, '--token', token], creds),
      cli(['login', '--url', app.url, '--token', token, '--with-token'], creds, token),
      cli(['login', '--url', app.url, '--with-token', '--no-browser'], creds, token),
      cli(['login', '--url', app.url, '--with-token'], creds, '\n'),
      cli(['login', '--url', app.url, '--with-token'], creds, bot.token),
    ]);
    expect(flag).toMatchObject({ code: 0, out: expect.stringContaining(`as ${handle}`) });
    expect(both).toMatchObject({ code: 2, err: 'switchboard: give the token once: --token TOKEN or --with-token (stdin), not both\n' });
    expect(noBrowser).toMatchObject({ code: 2, err: 'switchboard: --no-browser is for the browser login; with a token there is no browser to open\n' });
    expect(empty).toMatchObject({ code: 2, err: 'switchboard: stdin: no token given\n' });
    expect(endpointCredential.code).toBe(2);
    expect(endpointCredential.err).toMatch(/^switchboard: stdin: that is an endpoint credential \(sbk_\.\.\.\).*personal access token \(sbp_\.\.\.\)/);
    expect(endpointCredential.err).not.toContain(bot.token);
  });

  it('exits 1 when not logged in, and when the server refuses the token', async () => {
    const [none, refused] = await Promise.all([
      cli(['auth', 'status']),
      cli(['auth', 'status'], { SWITCHBOARD_URL: app.url, SWITCHBOARD_TOKEN: 'sbp_not_a_real_token' }),
    ]);
    expect(none).toMatchObject({ code: 1, out: '' });
    expect(none.err).toBe('switchboard: not logged in: set SWITCHBOARD_URL and SWITCHBOARD_TOKEN, or run `switchboard login --url URL` (browser) or `switchboard login --url URL --with-token` (token on stdin)\n');
    expect(refused).toMatchObject({ code: 1, out: '' });
    expect(refused.err).toBe(`switchboard: ${app.url} does not accept the token from SWITCHBOARD_TOKEN: it is mistyped or from another server (unauthenticated)\n`);
  });
});

describe('server URLs', () => {
  it('refuses a URL without a scheme, suggesting http://, as a usage mistake (never ERR_INVALID_URL)', async () => {
    const [bare, hostPort, viaLogin, ftp] = await Promise.all([
      cli(['endpoint', 'list'], { SWITCHBOARD_URL: '127.0.0.1:8080', SWITCHBOARD_TOKEN: token }),
      cli(['endpoint', 'list'], { SWITCHBOARD_URL: 'localhost:8080', SWITCHBOARD_TOKEN: token }),
      cli(['login', '--url', '127.0.0.1:8080', '--token', token]),
      cli(['doctor'], { SWITCHBOARD_URL: 'ftp://example.com', SWITCHBOARD_TOKEN: token }),
    ]);
    expect(bare).toMatchObject({ code: 2, err: 'switchboard: SWITCHBOARD_URL: "127.0.0.1:8080" has no http:// or https://; did you mean http://127.0.0.1:8080?\n' });
    expect(hostPort).toMatchObject({ code: 2, err: 'switchboard: SWITCHBOARD_URL: "localhost:8080" has no http:// or https://; did you mean http://localhost:8080?\n' });
    expect(viaLogin).toMatchObject({ code: 2, err: 'switchboard: --url: "127.0.0.1:8080" has no http:// or https://; did you mean http://127.0.0.1:8080?\n' });
    expect(ftp).toMatchObject({ code: 2, err: 'switchboard: SWITCHBOARD_URL: "ftp://example.com" uses ftp://; the server speaks http:// or https://\n' });
    for (const r of [bare, hostPort, viaLogin, ftp]) expect(r.err).not.toMatch(/ERR_INVALID_URL|Invalid URL/);
  });

  it('takes a URL ending in /api/v1 (as copied from a curl line) as the server URL', async () => {
    const [withSlash, without] = await Promise.all([
      cli(['endpoint', 'list'], { SWITCHBOARD_URL: `${app.url}/api/v1/`, SWITCHBOARD_TOKEN: token }),
      cli(['endpoint', 'list'], { SWITCHBOARD_URL: `${app.url}/api/v1`, SWITCHBOARD_TOKEN: token }),
    ]);
    for (const r of [withSlash, without]) {
      expect(r.err).toBe('');
      expect(r.code).toBe(0);
      expect(r.out).toContain(bot.slug);
    }
  });
});

describe('doctor and every command tell an unreachable server from a refused token', () => {
  it('names the URL and the cause when the server is not there: connection refused, and no such host', async () => {
    const url = `http://127.0.0.1:${await closedPort()}`;
    const [doctor, list, dns] = await Promise.all([
      cli(['doctor'], { SWITCHBOARD_URL: url, SWITCHBOARD_TOKEN: token }),
      cli(['endpoint', 'list'], { SWITCHBOARD_URL: url, SWITCHBOARD_TOKEN: token }),
      cli(['doctor', '--json'], { SWITCHBOARD_URL: 'http://switchboard-test.invalid:8080', SWITCHBOARD_TOKEN: token }),
    ]);
    const refused = `cannot reach ${url} (from SWITCHBOARD_URL): connection refused (ECONNREFUSED); is the server running there?`;
    expect(doctor.code).toBe(1);
    expect(doctor.out).toContain(`✗ server: ${refused}\n`);
    expect(doctor.err).toBe(`switchboard: ${refused}\n`);
    expect(list).toMatchObject({ code: 1, out: '', err: `switchboard: ${refused}\n` });
    expect(dns.code).toBe(1);
    expect(dns.err).toMatch(/^switchboard: cannot reach http:\/\/switchboard-test\.invalid:8080 \(from SWITCHBOARD_URL\): no such host switchboard-test\.invalid \(DNS lookup failed, E[A-Z_]+\)\n$/);
    expect(JSON.parse(dns.out)).toMatchObject({ credentials: { live: false, problem: 'unreachable' } });
  });

  it('says an unknown token, a revoked token and an endpoint credential each for what it is', async () => {
    const revoked = await humanWithToken(db.sql);
    await revokeToken(db.sql, revoked.token.slice(0, 12), app.clock.now());
    const as = (t: string) => ({ SWITCHBOARD_URL: app.url, SWITCHBOARD_TOKEN: t });
    const [unknown, wasRevoked, endpointCredential, pushWithCredential, json] = await Promise.all([
      cli(['doctor'], as('sbp_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA')),
      cli(['doctor'], as(revoked.token)),
      cli(['doctor'], as(bot.token)),
      cli(['todo', 'push', bot.slug, 'self-assigned'], as(bot.token)),
      cli(['doctor', '--json'], as(bot.token)),
    ]);
    const notAccepted = `${app.url} does not accept the token from SWITCHBOARD_TOKEN: it is mistyped or from another server (unauthenticated)`;
    expect(unknown).toMatchObject({ code: 1, err: `switchboard: ${notAccepted}\n` });
    expect(unknown.out).toContain(`✗ credentials: ${notAccepted}\n`);
    // The server tells the holder of a revoked token that it was revoked (src/api/auth.ts).
    expect(wasRevoked).toMatchObject({ code: 1, err: 'switchboard: the token from SWITCHBOARD_TOKEN was revoked; mint a new one with `switchboard admin token create HANDLE` (unauthenticated)\n' });
    const sbk =
      'switchboard: the token from SWITCHBOARD_TOKEN is an endpoint credential (sbk_...), which only an agent\'s MCP connection takes; ' +
      'the CLI needs a personal access token (sbp_...) from `switchboard admin token create HANDLE` (unauthenticated)\n';
    expect(endpointCredential).toMatchObject({ code: 1, err: sbk });
    expect(pushWithCredential).toMatchObject({ code: 1, out: '', err: sbk });
    expect(JSON.parse(json.out)).toMatchObject({ credentials: { live: false, url: app.url, problem: 'endpoint_credential' } });
    for (const r of [endpointCredential, pushWithCredential, json]) expect(r.out + r.err).not.toContain(bot.token);
  });
});

describe('errors in the words of the command line', () => {
  it("names the flag, not the API field, and exits 2 for the server's invalid_argument", async () => {
    const [queue, verb, push] = await Promise.all([
      cli(['webhook', 'create', bot.slug, '--source', 'github', '--queue', 'no such queue'], env),
      cli(['endpoint', 'vend', 'verb-bot', '--verb', 'fly'], env),
      cli(['todo', 'push', bot.slug, 'x', '--max-attempts', '1000'], env),
    ]);
    expect(queue.code).toBe(2);
    expect(queue.err).toMatch(/^switchboard: --queue: .*\(invalid_argument\)\n$/);
    expect(queue.err).not.toContain('target_queue');
    expect(verb.code).toBe(2);
    expect(verb.err).toMatch(/^switchboard: --verb: unknown verb "fly"; known verbs: .*\(invalid_argument\)\n$/);
    expect(push.code).toBe(2);
    expect(push.err).toMatch(/^switchboard: --max-attempts: .*\(invalid_argument\)\n$/);
  });

  it('suggests the slug when an endpoint is named by its agent name or a near miss, and exits 1', async () => {
    const [byName, typo, push, nothingClose, todoMissing] = await Promise.all([
      cli(['endpoint', 'show', 'review-bot'], env),
      cli(['endpoint', 'presence', 'reveiw-bot'], env),
      cli(['todo', 'push', 'review-bot', 'Review PR 12'], env),
      cli(['endpoint', 'show', 'zzzzzzzzzzzz'], env),
      cli(['todo', 'show', bot.slug, 'td_00000000-0000-4000-8000-000000000000'], env),
    ]);
    for (const [r, ref] of [[byName, 'review-bot'], [typo, 'reveiw-bot'], [push, 'review-bot']] as const) {
      expect(r).toMatchObject({ code: 1, out: '', err: `switchboard: endpoint ${ref} was not found among yours; did you mean ${bot.slug}?\n` });
    }
    expect(nothingClose).toMatchObject({ code: 1, err: 'switchboard: endpoint zzzzzzzzzzzz was not found among yours\n' });
    // The endpoint exists; what is missing is the todo, so no suggestion.
    expect(todoMissing.code).toBe(1);
    expect(todoMissing.err).toMatch(/^switchboard: no todo .* \(not_found\)\n$/);
  });

  it('states the exit codes in --help', async () => {
    const help = await cli(['--help']);
    expect(help.code).toBe(0);
    expect(help.out).toContain('Exit codes:\n  0  ok\n  1  refused or failed');
    expect(help.out).toContain('  2  usage error: a wrong command, flag or argument, whether the CLI or the server (400) found it\n');
  });
});

describe('switchboard serve --help', () => {
  it('lists every environment variable with its default and a line about it', async () => {
    const r = await cli(['serve', '--help']);
    expect(r.code).toBe(0);
    for (const v of CONFIG_VARIABLES) expect(r.out).toContain(`  ${v.name}  (default: ${v.default})\n      ${v.description}\n`);
    expect(r.out).toContain('SWITCHBOARD_LOG_FORMAT  (default: auto)');
  });
});

describe('switchboard completion', () => {
  let scripts: Record<'bash' | 'zsh' | 'fish', string>;
  beforeAll(async () => {
    const [bash, zsh, fish] = await Promise.all([cli(['completion', 'bash']), cli(['completion', 'zsh']), cli(['completion', 'fish'])]);
    for (const r of [bash, zsh, fish]) expect(r).toMatchObject({ code: 0, err: '' });
    scripts = { bash: bash.out, zsh: zsh.out, fish: fish.out };
  }, 30_000);

  it('refuses an unknown shell as a usage mistake, naming the choices', async () => {
    const r = await cli(['completion', 'tcsh']);
    expect(r.code).toBe(2);
    expect(r.err).toContain("argument 'shell'. Allowed choices are bash, zsh, fish.");
  });

  it('bash: the script parses, and completes every top-level command and the flags of a subcommand', async () => {
    const file = join(home, 'switchboard.bash');
    await writeFile(file, scripts.bash);
    expect((await run('bash', ['-n', file])).code).toBe(0);
    const { buildProgram } = await import('./main.ts');
    const program = buildProgram({ io: { out: () => {}, err: () => {} }, env: {}, readStdin: async () => '', stdinIsTty: false });
    const topLevel = program.commands.map((c) => c.name());
    expect(topLevel).toEqual(expect.arrayContaining(['serve', 'endpoint', 'todo', 'auth', 'completion', 'doctor']));
    const complete = async (...words: string[]) => {
      const probe = `source ${file}; COMP_WORDS=(${words.map((w) => `'${w}'`).join(' ')}); COMP_CWORD=${words.length - 1}; _switchboard; printf '%s\\n' "\${COMPREPLY[@]}"`;
      const r = await run('bash', ['-c', probe]);
      expect(r.err).toBe('');
      return r.out.split('\n').filter(Boolean);
    };
    expect(await complete('switchboard', '')).toEqual(topLevel);
    for (const name of topLevel) expect(scripts.bash).toContain(name);
    const vendFlags = program.commands.find((c) => c.name() === 'endpoint')!.commands.find((c) => c.name() === 'vend')!.options.map((o) => o.long);
    expect(await complete('switchboard', 'endpoint', 'vend', '-q', 'reviews', '--')).toEqual([...vendFlags, '--help']);
    expect(await complete('switchboard', 'endpoint', 'vend', '--queue', '')).toEqual([]); // a value: left to the shell
    expect(await complete('switchboard', 'admin', 'token', '')).toEqual(['create', 'list', 'revoke']);
    expect(await complete('switchboard', 'completion', '')).toEqual(['bash', 'zsh', 'fish']);
  }, 30_000);

  it.skipIf(!hasShell('zsh'))('zsh: the script parses and describes the commands', async () => {
    const file = join(home, '_switchboard');
    await writeFile(file, scripts.zsh);
    expect((await run('zsh', ['-n', file])).code).toBe(0);
    const stubs = 'compdef() { :; }; _describe() { print -rl -- "${(@P)4}"; }; compadd() { print -rl -- "${(@P)2}"; }; _files() { print files; }';
    const r = await run('zsh', ['-c', `${stubs}; source ${file}; words=(switchboard endpoint ''); CURRENT=3; _switchboard`]);
    expect(r.out).toContain('vend:vend a new endpoint');
    expect(r.out).toContain('clock-out:clock an endpoint out');
  });

  it.skipIf(!hasShell('fish'))('fish: the script parses and completes commands and flags', async () => {
    const file = join(home, 'switchboard.fish');
    await writeFile(file, scripts.fish);
    expect((await run('fish', ['-n', file])).code).toBe(0);
    const r = await run('fish', ['-c', `source ${file}; complete -C'switchboard endpoint '; complete -C'switchboard endpoint vend -q x --v'`]);
    expect(r.out).toMatch(/^vend\tvend a new endpoint/m);
    expect(r.out).toMatch(/^--verb\ta verb to grant/m);
  });
});

function hasShell(name: string): boolean {
  return (process.env.PATH ?? '').split(':').some((dir) => {
    try {
      return statSync(join(dir, name)).isFile();
    } catch {
      return false;
    }
  });
}

/** Runs a command to its end with only `env`, collecting its output. */
function run(command: string, args: string[], env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: home }, stdin = ''): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? -1, out, err }));
    // A command that exits without reading its input closes the pipe: that is not this test's failure.
    child.stdin.on('error', () => {});
    child.stdin.end(stdin);
  });
}
