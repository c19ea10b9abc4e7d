import { IANA_ZONE_NAMES } from './zone-names.ts';

/**
 * Time zones for shifts: name validation and the UTC offset of an instant in a zone.
 *
 * The zone database is the ICU/tzdata copy compiled into the Node binary (`Intl`), so validation
 * and wall-clock conversion never depend on the host's /usr/share/zoneinfo (SPEC-0022 REQ "Shift
 * Schedule": the zone database is embedded).
 *
 * Name policy (DESIGN.md decision 3, reference B.8 §2):
 * - exact case only: `UTC` yes, `utc` no (ICU itself is case-insensitive, so exact case is checked
 *   against the embedded IANA name list in zone-names.ts);
 * - `Local` (Go's name for the host zone) is refused: every instance must reach the same answer;
 * - legacy IANA links (`US/Pacific`, `Asia/Calcutta`, `GB`, `EST5EDT`, `Etc/GMT+5`, ...) ARE accepted
 *   when spelled exactly as IANA spells them and ICU knows them. Harness (Go's zone loader with the
 *   `backward` file) accepts them too, so a shift copied from `operating_hours` keeps working, and
 *   accepting never makes us looser than Harness. The name is kept as written, not canonicalised
 *   (`US/Pacific` stays `US/Pacific` in the canonical form).
 */

const MS_PER_SECOND = 1000;

/** The UTC offset (ms, wall clock minus UTC) of instants in one zone. */
export interface ZoneClock {
  readonly name: string;
  /** true when the zone is UTC itself (no Intl call needed). */
  readonly utc: boolean;
  offsetAt(ms: number): number;
}

let supported: ReadonlySet<string> | undefined;
function intlSupported(): ReadonlySet<string> {
  supported ??= new Set(Intl.supportedValuesOf('timeZone'));
  return supported;
}

let lowerCaseIndex: Map<string, string> | undefined;
function properSpelling(name: string): string | undefined {
  if (!lowerCaseIndex) {
    lowerCaseIndex = new Map();
    for (const n of [...IANA_ZONE_NAMES, ...intlSupported()]) lowerCaseIndex.set(n.toLowerCase(), n);
  }
  return lowerCaseIndex.get(name.toLowerCase());
}

/** Quotes a string for an error message: printable ASCII as is, everything else escaped. */
export function quote(s: string): string {
  let out = '"';
  for (const ch of s) {
    const cp = ch.codePointAt(0)!;
    if (ch === '"' || ch === '\\') out += `\\${ch}`;
    else if (cp >= 0x20 && cp < 0x7f) out += ch;
    else if (ch === '\n') out += '\\n';
    else if (ch === '\t') out += '\\t';
    else if (ch === '\r') out += '\\r';
    else out += cp > 0xffff ? `\\u{${cp.toString(16).toUpperCase()}}` : `\\u${cp.toString(16).toUpperCase().padStart(4, '0')}`;
  }
  return `${out}"`;
}

const clocks = new Map<string, ZoneClock>();

function intlAccepts(name: string): Intl.DateTimeFormat | null {
  try {
    return new Intl.DateTimeFormat('en-US', {
      timeZone: name,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
  } catch {
    return null;
  }
}

/**
 * Why a zone name is not acceptable, or null when it is. The text is the reason of the
 * invalid_argument the shift parser throws, and always names the zone.
 */
export function zoneProblem(name: string): string | null {
  if (clocks.has(name)) return null;
  const unknown = `unknown time zone ${quote(name)}`;
  if (name === 'Local') return `${unknown} (the host's zone is not allowed: name an IANA zone such as "UTC")`;
  const known = IANA_ZONE_NAMES.has(name) || intlSupported().has(name);
  if (!known) {
    const proper = properSpelling(name);
    if (proper !== undefined && proper !== name) return `${unknown} (zone names are case-sensitive: did you mean ${quote(proper)}?)`;
    return unknown;
  }
  const fmt = intlAccepts(name);
  if (!fmt) return unknown;
  clocks.set(name, makeClock(name, fmt));
  return null;
}

/** The clock of a zone name that zoneProblem accepted. */
export function zoneClock(name: string): ZoneClock {
  const c = clocks.get(name);
  if (c) return c;
  const problem = zoneProblem(name);
  if (problem !== null) throw new RangeError(problem);
  return clocks.get(name)!;
}

const WALL = /^(\d{1,2})\/(\d{1,2})\/(\d+), (\d{2}):(\d{2}):(\d{2})$/;

function makeClock(name: string, fmt: Intl.DateTimeFormat): ZoneClock {
  if (fmt.resolvedOptions().timeZone === 'UTC') return { name, utc: true, offsetAt: () => 0 };
  const wallAsUtc = (second: number): number => {
    const text = fmt.format(second);
    const m = WALL.exec(text);
    let y: number, mo: number, d: number, h: number, mi: number, s: number;
    if (m) {
      [mo, d, y, h, mi, s] = [Number(m[1]), Number(m[2]), Number(m[3]), Number(m[4]), Number(m[5]), Number(m[6])];
    } else {
      const parts: Record<string, number> = {};
      for (const p of fmt.formatToParts(second)) if (p.type !== 'literal') parts[p.type] = Number(p.value);
      [y, mo, d, h, mi, s] = [parts.year ?? NaN, parts.month ?? NaN, parts.day ?? NaN, parts.hour ?? NaN, parts.minute ?? NaN, parts.second ?? NaN];
    }
    const date = new Date(0);
    date.setUTCFullYear(y, mo - 1, d);
    date.setUTCHours(h, mi, s, 0);
    return date.getTime();
  };
  return {
    name,
    utc: false,
    offsetAt(ms: number): number {
      const second = Math.floor(ms / MS_PER_SECOND) * MS_PER_SECOND;
      return wallAsUtc(second) - second;
    },
  };
}
