/** RFC 3339 UTC with whole seconds: the one timestamp format on every wire. */
export function rfc3339(d: Date): string;
export function rfc3339(d: Date | null | undefined): string | undefined;
export function rfc3339(d: Date | null | undefined): string | undefined {
  if (!d) return undefined;
  return d.toISOString().replace(/\.\d{3}Z$/, 'Z');
}
