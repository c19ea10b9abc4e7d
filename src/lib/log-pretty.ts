// The human-readable log format: what a person at a terminal reads instead of pino's JSON lines.
//   22:07:01.123 INFO  presence changed slug=review-bot-3fa9 from=out to=in
// Redaction has already happened (pino redacts before it writes), so nothing here sees a secret.

const LEVEL_NAMES: Record<number, string> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };
const LEVEL_COLOURS: Record<number, string> = { 10: '90', 20: '90', 30: '32', 40: '33', 50: '31', 60: '35' };
/** pino's own fields, shown in the line's head or not at all. */
const HEAD_FIELDS = new Set(['level', 'time', 'msg', 'service', 'pid', 'hostname']);

const clock = (epochMs: number) => {
  const d = new Date(epochMs);
  const pad = (n: number, w = 2) => String(n).padStart(w, '0');
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
};

/** `key=value`, quoting a value only where a reader could misparse it. */
function field(key: string, value: unknown): string {
  if (typeof value === 'string') return `${key}=${/^[^\s"=]+$/.test(value) ? value : JSON.stringify(value)}`;
  return `${key}=${JSON.stringify(value)}`;
}

/** One JSON log line as a readable line (plus a stack, when an error carries one). */
export function prettyLine(json: string, colour: boolean): string {
  let entry: Record<string, unknown>;
  try {
    entry = JSON.parse(json) as Record<string, unknown>;
  } catch {
    return json.endsWith('\n') ? json : `${json}\n`;
  }
  const level = typeof entry.level === 'number' ? entry.level : 30;
  const name = (LEVEL_NAMES[level] ?? String(level)).padEnd(5);
  const head = `${typeof entry.time === 'number' ? clock(entry.time) : ''} ${colour ? `\x1b[${LEVEL_COLOURS[level] ?? '0'}m${name}\x1b[0m` : name}`;
  let stack = '';
  const fields: string[] = [];
  for (const [key, value] of Object.entries(entry)) {
    if (HEAD_FIELDS.has(key) || value === undefined) continue;
    if (key === 'err' && typeof value === 'object' && value !== null && typeof (value as { stack?: unknown }).stack === 'string') {
      stack = `\n    ${(value as { stack: string }).stack.split('\n').join('\n    ')}`;
      fields.push(field('err', (value as { message?: unknown }).message ?? ''));
      continue;
    }
    fields.push(field(key, value));
  }
  const msg = typeof entry.msg === 'string' ? entry.msg : '';
  return `${[head, msg, ...fields].filter((p) => p !== '').join(' ')}${stack}\n`;
}

/** A stream pino writes JSON lines to, passing each on to `out` as a readable line. */
export function prettyStream(out: NodeJS.WritableStream, colour: boolean): { write(chunk: string): boolean } {
  return { write: (chunk: string) => out.write(prettyLine(chunk.trimEnd(), colour)) };
}
