import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger, type LogFormat } from './log.ts';
import { prettyLine } from './log-pretty.ts';

/** A stream that says it is (or is not) a terminal, and what was written to it. */
function sink(terminal: boolean): { stream: PassThrough; text: () => string } {
  const stream = Object.assign(new PassThrough(), { isTTY: terminal });
  let text = '';
  stream.on('data', (d) => (text += d));
  return { stream, text: () => text };
}

function logOnce(terminal: boolean, format: LogFormat): string {
  const out = sink(terminal);
  createLogger('info', out.stream, format).info({ slug: 'review-bot', token: 'sbk_secret', note: 'two words' }, 'presence changed');
  return out.text();
}

describe('createLogger', () => {
  it('writes JSON lines when the stream is not a terminal (auto)', () => {
    const line = JSON.parse(logOnce(false, 'auto')) as Record<string, unknown>;
    expect(line).toMatchObject({ level: 30, msg: 'presence changed', slug: 'review-bot', service: 'switchboard' });
  });

  it('writes readable lines to a terminal (auto), and redacts there too', () => {
    const text = logOnce(true, 'auto');
    expect(text).toMatch(/^\d\d:\d\d:\d\d\.\d{3} \x1b\[32mINFO \x1b\[0m presence changed slug=review-bot token=\[redacted\] note="two words"\n$/);
    expect(text).not.toContain('sbk_secret');
  });

  it('SWITCHBOARD_LOG_FORMAT wins over the terminal check: json on a terminal, pretty into a pipe (no colour)', () => {
    expect(() => JSON.parse(logOnce(true, 'json'))).not.toThrow();
    expect(logOnce(false, 'pretty')).toMatch(/^\d\d:\d\d:\d\d\.\d{3} INFO  presence changed slug=review-bot token=\[redacted\] note="two words"\n$/);
  });
});

describe('prettyLine', () => {
  it('puts an error\'s stack on indented lines after its message', () => {
    const json = JSON.stringify({ level: 50, time: Date.UTC(2026, 0, 1), msg: 'request failed', err: { message: 'boom', stack: 'Error: boom\n    at f (x.ts:1:1)' }, status: 500 });
    const out = prettyLine(json, false);
    expect(out).toMatch(/ ERROR request failed err=boom status=500\n    Error: boom\n        at f \(x\.ts:1:1\)\n$/);
  });

  it('passes a line that is not JSON through unchanged', () => {
    expect(prettyLine('not json', false)).toBe('not json\n');
  });
});
