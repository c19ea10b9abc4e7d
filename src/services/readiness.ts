import type { Sql } from '../db/connect.ts';
import { pendingMigrations } from '../db/migrate.ts';
import { pingDatabase } from '../store/health.ts';

/** One check's answer: `ok`, or why not. */
export type CheckResult = 'ok' | string;

export interface ReadinessReport {
  ready: boolean;
  checks: { database: CheckResult; migrations: CheckResult; listen: CheckResult };
}

/** How long /readyz waits for its LISTEN probe to come back. */
export const LISTEN_PROBE_TIMEOUT_MS = 2_000;

/**
 * Whether this instance should get traffic: the database answers, every migration this build
 * ships is applied, and its LISTEN connection hears (a NOTIFY it sends comes back), so doorbells
 * and cross-instance wakeups work. Liveness is only "the process answers" and lives in the route.
 */
export class Readiness {
  #migrated = false;

  constructor(
    private readonly sql: Sql,
    /** Probes the LISTEN connection; undefined until wakeups have started. */
    private readonly listenProbe: () => ((timeoutMs: number) => Promise<boolean>) | undefined,
    /** Where this build's migrations are (tests point it elsewhere). */
    private readonly migrationsDir?: string,
  ) {}

  async check(): Promise<ReadinessReport> {
    const [database, migrations, listen] = await Promise.all([this.#database(), this.#migrations(), this.#listen()]);
    return { ready: database === 'ok' && migrations === 'ok' && listen === 'ok', checks: { database, migrations, listen } };
  }

  /** Resolves when the database answers a trivial query; rejects with the driver's error when it cannot be reached (/healthz). */
  async ping(): Promise<void> {
    await pingDatabase(this.sql);
  }

  async #database(): Promise<CheckResult> {
    try {
      await this.ping();
      return 'ok';
    } catch (err) {
      return `unreachable: ${(err as Error).message}`;
    }
  }

  async #migrations(): Promise<CheckResult> {
    if (this.#migrated) return 'ok';
    try {
      const pending = await pendingMigrations(this.sql, this.migrationsDir);
      if (pending.length > 0) return `pending: ${pending.join(', ')}`;
      this.#migrated = true; // applied migrations are never taken back
      return 'ok';
    } catch (err) {
      return `unknown: ${(err as Error).message}`;
    }
  }

  async #listen(): Promise<CheckResult> {
    const probe = this.listenProbe();
    if (!probe) return 'not listening yet';
    return (await probe(LISTEN_PROBE_TIMEOUT_MS)) ? 'ok' : `no notification came back within ${LISTEN_PROBE_TIMEOUT_MS} ms`;
  }
}
