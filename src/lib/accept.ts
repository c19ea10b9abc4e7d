/**
 * The one reading of an HTTP Accept header (RFC 9110 section 12.5.1): a list of media ranges,
 * `type/subtype`, `type/*` or `*\/*`, each with an optional q-value (0 to 1, default 1). A media
 * type's quality is the q of the MOST SPECIFIC range that matches it, so `*\/*, text/plain;q=0`
 * refuses text/plain; q=0 means not acceptable. Media-type parameters other than q are ignored.
 * A malformed range is skipped; a malformed q counts as 0. An absent or empty header names nothing:
 * the callers decide what that means (the MCP transport refuses it, /healthz answers text).
 */

export interface MediaRange {
  /** Lower case; `*` for any. */
  type: string;
  /** Lower case; `*` for any. */
  subtype: string;
  q: number;
}

/** How well a header rates one media type: its q and how specific the range that decided it was. */
export interface Rating {
  q: number;
  /** 2 an exact `type/subtype`, 1 a `type/*`, 0 `*\/*`, -1 no range matched (q is then 0). */
  specificity: number;
}

const TOKEN = "[a-z0-9!#$%&'*+.^_`|~-]+";
const RANGE = new RegExp(`^(${TOKEN})/(${TOKEN})$`);
const QVALUE = /^(?:0(?:\.\d{0,3})?|1(?:\.0{0,3})?)$/;

/** The media ranges of an Accept header, in order. */
export function parseAccept(header: string | undefined): MediaRange[] {
  const ranges: MediaRange[] = [];
  for (const part of (header ?? '').split(',')) {
    const [range = '', ...params] = part.split(';').map((p) => p.trim().toLowerCase());
    const m = RANGE.exec(range);
    if (!m) continue;
    const [, type, subtype] = m as unknown as [string, string, string];
    if (type === '*' && subtype !== '*') continue; // `*/json` is no media range
    let q = 1;
    const qParam = params.find((p) => /^q\s*=/.test(p));
    if (qParam !== undefined) {
      const value = qParam.replace(/^q\s*=\s*/, '');
      q = QVALUE.test(value) ? Number(value) : 0;
    }
    ranges.push({ type, subtype, q });
  }
  return ranges;
}

const specificityOf = (r: MediaRange): number => (r.type === '*' ? 0 : r.subtype === '*' ? 1 : 2);

/** The rating of `mediaType` (e.g. `application/json`) under the ranges: the most specific match decides; a tie in specificity takes the higher q. */
export function rate(ranges: readonly MediaRange[], mediaType: string): Rating {
  const [type = '', subtype = ''] = mediaType.toLowerCase().split('/');
  let best: Rating = { q: 0, specificity: -1 };
  for (const r of ranges) {
    const matches = (r.type === '*' || r.type === type) && (r.subtype === '*' || r.subtype === subtype);
    if (!matches) continue;
    const specificity = specificityOf(r);
    if (specificity > best.specificity || (specificity === best.specificity && r.q > best.q)) best = { q: r.q, specificity };
  }
  return best;
}

/** True when the header names `mediaType` (exactly or by a wildcard) with a q above 0. */
export function isAcceptable(header: string | undefined, mediaType: string): boolean {
  return rate(parseAccept(header), mediaType).q > 0;
}

/**
 * Of the types a response can take, the one the header ranks highest: by q, then by how
 * specifically the header names it (`application/json, *\/*` prefers JSON), then by the order
 * given. Null when the header accepts none of them (an absent header included).
 */
export function preferredType(header: string | undefined, offered: readonly string[]): string | null {
  const ranges = parseAccept(header);
  let best: { type: string; rating: Rating } | null = null;
  for (const type of offered) {
    const rating = rate(ranges, type);
    if (rating.q <= 0) continue;
    if (!best || rating.q > best.rating.q || (rating.q === best.rating.q && rating.specificity > best.rating.specificity)) best = { type, rating };
  }
  return best?.type ?? null;
}
