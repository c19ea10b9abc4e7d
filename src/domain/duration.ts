const UNIT_MS = { h: 3_600_000, m: 60_000, s: 1_000 } as const;
const AMOUNT = String.raw`(\d{1,6}(?:\.\d{1,6})?)`;
/** `2h`, `30m`, `1h30m`, `90s`, `1.5h`: each unit at most once, in the order h, m, s. */
const DURATION = new RegExp(`^(?:${AMOUNT}h)?(?:${AMOUNT}m)?(?:${AMOUNT}s)?$`);

/**
 * The one duration grammar (clock_in's `for`, the board's and the CLI's `until`, config windows):
 * hours, minutes and seconds, each at most once and in that order, up to six digits and six
 * decimals each. Milliseconds (zero allowed; the caller decides), or null when the text is not one.
 */
export function parseDuration(text: string): number | null {
  const m = text === '' ? null : DURATION.exec(text);
  if (!m) return null;
  const [, h, min, s] = m;
  return Math.round(Number(h ?? 0) * UNIT_MS.h + Number(min ?? 0) * UNIT_MS.m + Number(s ?? 0) * UNIT_MS.s);
}
