import type { Io } from './output.ts';

/** What every command receives: where to print and which environment to read. Tests swap both. */
export interface CliContext {
  io: Io;
  env: NodeJS.ProcessEnv;
  /** Reads stdin to the end (for `--payload @-` and confirmations). */
  readStdin: () => Promise<string>;
  stdinIsTty: boolean;
}
