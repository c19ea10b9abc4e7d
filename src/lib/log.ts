import { pino, type Logger } from 'pino';

export type { Logger };
export type LogLevel = 'debug' | 'info' | 'warn' | 'error';

/**
 * Structured JSON logs. Redaction is a second line of defence: no code path should pass a
 * credential to the logger in the first place.
 */
export function createLogger(level: LogLevel | 'silent' = 'info', destination?: NodeJS.WritableStream): Logger {
  return pino(
    {
      level,
      base: { service: 'switchboard' },
      redact: {
        paths: ['token', 'credential', 'authorization', '*.token', '*.credential', '*.authorization', 'headers.authorization'],
        censor: '[redacted]',
      },
    },
    destination ?? process.stdout,
  );
}
