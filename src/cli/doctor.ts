import type { Command } from 'commander';
import { GUIDE_LINK } from '../domain/guides.ts';
import { VERSION } from '../lib/version.ts';
import type { DoorbellTestReport, DoorbellTestStarted, EndpointView, HealthView, MeView } from '../api/wire.ts';
import { ApiClient, ApiError } from './client.ts';
import type { CliContext } from './context.ts';
import { loadCredentials } from './credentials.ts';
import { reportedPresence } from './endpoint.ts';
import { CliError, EXIT_FAILURE, printJson, printTable, processIo, usageError } from './output.ts';

/** `60`, `60s`, `2m`, `1m30s` → seconds, within the self-test's 10-300 s. */
export function parseWait(raw: string): number {
  const m = /^(?:(\d+)m)?(?:(\d+)s?)?$/.exec(raw.trim());
  const seconds = m && (m[1] || m[2]) ? Number(m[1] ?? 0) * 60 + Number(m[2] ?? 0) : NaN;
  if (!Number.isInteger(seconds) || seconds < 10 || seconds > 300) throw usageError(`--wait: ${JSON.stringify(raw)} must be 10s to 300s (e.g. 60s, 2m)`);
  return seconds;
}

const majorMinor = (v: string) => v.replace(/^v/, '').split('.').slice(0, 2).join('.');
function olderThan(a: string, b: string): boolean {
  const pa = a.replace(/^v/, '').split('.').map(Number);
  const pb = b.replace(/^v/, '').split('.').map(Number);
  for (let i = 0; i < 3; i++) if ((pa[i] ?? 0) !== (pb[i] ?? 0)) return (pa[i] ?? 0) < (pb[i] ?? 0);
  return false;
}

/** GET /healthz: its JSON answer, or why it failed (unreachable, not 200, not the health JSON). */
async function checkHealth(url: string): Promise<{ view: HealthView | null; error?: string }> {
  try {
    const res = await fetch(`${url}/healthz`, { headers: { accept: 'application/json' }, signal: AbortSignal.timeout(10_000) });
    if (!res.ok) return { view: null, error: `HTTP ${res.status} ${(await res.text()).trim().slice(0, 200)}`.trim() };
    const view = (await res.json()) as HealthView;
    return view?.status === 'ok' ? { view } : { view: null, error: `unexpected answer ${JSON.stringify(view).slice(0, 200)}` };
  } catch (e) {
    return { view: null, error: (e as Error).message };
  }
}

/** Hints name the server's guides by path (/docs/connect#...); the terminal gets them as full URLs. */
const withServerLinks = (hint: string, url: string) => hint.replace(GUIDE_LINK, (p) => `${url}${p}`);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * switchboard doctor (SPEC-0025 REQ-10): the CLI and its credentials, the server's version, the
 * endpoints with their attached and unheard sessions, and with REF a live self-test polled once a
 * second until it has a verdict.
 */
export function registerDoctorCommand(program: Command, ctx: CliContext): void {
  program
    .command('doctor')
    .description('check the whole loop: credentials, server version, sessions, and (with REF) a live doorbell self-test')
    .argument('[ref]', 'an endpoint slug or id to run the self-test on')
    .option('--wait <duration>', 'how long the agent has to claim the test todo (10s to 300s)', '60s')
    .option('--json', 'print one JSON document instead of progress')
    .action(async (ref: string | undefined, opts: { wait: string; json?: boolean }) => {
      const wait = parseWait(opts.wait);
      const io = ctx.io;
      const say = (line: string) => !opts.json && io.out(`${line}\n`);
      const out: Record<string, unknown> = { cli: { version: VERSION } };
      const failed: string[] = [];
      const fail = (check: string) => {
        failed.push(check);
        say(`✗ ${check}`);
      };

      // 1. The CLI and its credentials.
      const creds = await loadCredentials(ctx.env);
      const api = new ApiClient(creds);
      say(`switchboard ${VERSION}`);
      try {
        const me = await api.get<MeView>('/me');
        out.credentials = { live: true, url: creds.url, handle: me.handle };
        say(`✓ credentials for ${creds.url} are live (signed in as ${me.handle})`);
      } catch (e) {
        // Unreachable, an unknown or revoked token, an endpoint credential: each says so in its message.
        const problem = e instanceof ApiError ? e.problem : 'failed';
        out.credentials = { live: false, url: creds.url, problem, error: (e as Error).message };
        say(`✗ ${problem === 'unreachable' ? 'server' : 'credentials'}: ${(e as Error).message}`);
        if (opts.json) printJson(io, out);
        throw new CliError((e as Error).message);
      }

      // 2. The server: /healthz answers ok (the database is reachable) and says its version.
      const health = await checkHealth(creds.url);
      const serverVersion = health.view?.version ?? null;
      const skew =
        health.view === null
          ? null
          : serverVersion === null
            ? 'the server does not report its version'
            : olderThan(serverVersion, VERSION)
              ? `the server (${serverVersion}) is older than this CLI (${VERSION})`
              : majorMinor(serverVersion) !== majorMinor(VERSION)
                ? `the server (${serverVersion}) and this CLI (${VERSION}) differ in major or minor version`
                : null;
      out.server = { healthy: health.view !== null, version: serverVersion, warning: skew, ...(health.error ? { error: health.error } : {}) };
      if (health.error) fail(`${creds.url}/healthz failed: ${health.error}`);
      else say(skew ? `! ${skew}` : `✓ server ${serverVersion}`);

      // 3. Endpoints with their sessions.
      const endpoints = await api.get<EndpointView[]>('/endpoints');
      // A revoked endpoint reports its state and no presence (null; '-' in the table).
      out.endpoints = endpoints.map((e) => ({
        slug: e.slug,
        state: e.state,
        presence: reportedPresence(e)?.presence ?? null,
        sessions: e.sessions,
        unheard_sessions: e.unheard_sessions,
        idle_sessions_ended: e.idle_sessions_ended,
      }));
      if (!opts.json) {
        if (endpoints.length === 0) io.out('No endpoints.\n');
        else {
          printTable(
            io,
            ['ENDPOINT', 'STATE', 'PRESENCE', 'SESSIONS', 'UNHEARD', 'IDLE ENDED'],
            endpoints.map((e) => [e.slug, e.state, reportedPresence(e)?.presence ?? '-', e.sessions, e.unheard_sessions, e.idle_sessions_ended]),
          );
          io.out('(live sessions on every instance: a stream open or a call within SWITCHBOARD_SESSION_IDLE; IDLE ENDED: sessions ended for idleness since vend)\n');
        }
      }
      // An out endpoint is not rung, so its sessions are not judged (as on the board). With REF the
      // self-test's verdict decides the exit code and the listing only warns.
      const warnings: string[] = [];
      for (const e of endpoints) {
        if (reportedPresence(e)?.presence === 'in' && e.unheard_sessions > 0) {
          const problem = `${e.slug} has ${e.unheard_sessions} unheard session(s): doorbells reach them but nothing acts on them (run switchboard doctor ${e.slug})`;
          if (ref === undefined) fail(problem);
          else {
            warnings.push(problem);
            say(`! ${problem}`);
          }
        }
      }
      if (warnings.length > 0) out.warnings = warnings;

      // 4. The live self-test.
      if (ref !== undefined) {
        const path = `/endpoints/${encodeURIComponent(ref)}/doorbell-tests`;
        const refApi = new ApiClient(creds, { endpointRef: ref, flags: { wait_seconds: '--wait' } });
        let start: DoorbellTestStarted;
        try {
          start = (await refApi.request<DoorbellTestStarted>('POST', path, { wait_seconds: wait })).body;
        } catch (e) {
          if (opts.json) printJson(io, { ...out, test: { error: (e as Error).message } });
          throw e;
        }
        say(`Self-test ${start.test_id} on ${ref}: ringing in about 2 s; the agent has ${wait} s to claim the test todo.`);
        const deadline = Date.now() + (wait + 20) * 1000;
        const tty = !opts.json && io === processIo && Boolean(process.stdout.isTTY);
        let report: DoorbellTestReport;
        let tick = 0;
        for (;;) {
          report = await api.get<DoorbellTestReport>(`${path}/${start.test_id}`);
          if (report.verdict !== 'pending' || Date.now() > deadline) break;
          const left = Math.max(0, Math.ceil((Date.parse(start.report_after) - Date.now()) / 1000));
          const line = `waiting for the agent to claim… ${left}s left`;
          if (tty) io.out(`\r${'⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏'[tick % 10]} ${line}   `);
          else if (tick % 10 === 0) say(line);
          tick++;
          await sleep(1000);
        }
        if (tty) io.out('\r\x1b[2K');
        out.test = report;
        if (!opts.json) {
          io.out(`verdict: ${report.verdict}\n`);
          io.out(`  written: ${report.delivered.written ? `yes, at ${report.delivered.at}` : 'no'}\n`);
          if (report.claimed_within_seconds !== null) io.out(`  claimed within ${report.claimed_within_seconds} s of the doorbell\n`);
          for (const h of report.hints) io.out(`  - ${withServerLinks(h, creds.url)}\n`);
        }
        if (report.verdict !== 'pass') failed.push(`the self-test did not pass (verdict ${report.verdict})`);
      }
      out.failed = failed;
      if (opts.json) printJson(io, out);
      if (failed.length > 0) throw new CliError(failed.length === 1 ? failed[0]! : `${failed.length} checks failed: ${failed.join('; ')}`, EXIT_FAILURE);
    });
}
