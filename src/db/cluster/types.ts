// What the cluster modules hand out: a running server and the log callback they report to.

export interface RunningCluster {
  /** Superuser connection URL (embedded: database `switchboard`; throwaway: database `postgres`). */
  url: string;
  /** The directory the cluster lives in (embedded: as given; throwaway: the temp dir). */
  dataDir: string;
  /** PGDATA inside dataDir. */
  pgData: string;
  logFile: string;
  port: number;
  /** Server version, e.g. "18.4". */
  version: string;
  binDir: string;
  stop(): Promise<void>;
}

export type ClusterLog = (msg: string, fields?: Record<string, unknown>) => void;
