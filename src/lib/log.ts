import { pino, type Logger } from 'pino';
import { prettyStream } from './log-pretty.ts';

export type { Logger };
export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
/** `auto`: readable lines when the log goes to a terminal, JSON lines otherwise. */
export type LogFormat = 'json' | 'pretty' | 'auto';

/**
 * Structured logs: JSON lines, or readable lines for a person at a terminal. Redaction is a second
 * line of defence: no code path should pass a credential to the logger in the first place.
 */
export function createLogger(level: LogLevel | 'silent' = 'info', destination?: NodeJS.WritableStream, format: LogFormat = 'auto'): Logger {
  const out = destination ?? process.stdout;
  const terminal = (out as { isTTY?: boolean }).isTTY === true;
  const pretty = format === 'pretty' || (format === 'auto' && terminal);
  // NO_COLOR (no-color.org) and a non-terminal keep the pretty lines plain.
  const colour = pretty && terminal && !process.env.NO_COLOR;
  return pino(
    {
      level,
      base: { service: 'switchboard' },
      redact: {
        paths: ['token', 'credential', 'authorization', '*.token', '*.credential', '*.authorization', 'headers.authorization'],
        censor: '[redacted]',
      },
    },
    pretty ? prettyStream(out, colour) : out,
  );
}
