/**
 * The board's only way to make HTML: a tagged template that escapes every interpolated value
 * unless it is already `Html` (the result of another `html` call). Templates quote every
 * attribute, so one escape covers text and attribute values alike; URLs are built only from
 * fixed paths with `path()`, whose dynamic segments are percent-encoded.
 */
export class Html {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value;
  }
}

export type Part = Html | string | number | boolean | null | undefined | readonly Part[];

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;', '`': '&#96;' };

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"'`]/g, (c) => ESCAPES[c]!);
}

function render(v: Part): string {
  if (v === null || v === undefined || v === false || v === true) return '';
  if (v instanceof Html) return v.value;
  if (Array.isArray(v)) return (v as readonly Part[]).map(render).join('');
  return escapeHtml(String(v));
}

export function html(strings: TemplateStringsArray, ...values: Part[]): Html {
  let out = strings[0]!;
  for (let i = 0; i < values.length; i++) out += render(values[i]) + strings[i + 1]!;
  return new Html(out);
}

/** Joins parts with a separator (both escaped unless Html). */
export function join(parts: readonly Part[], sep: Part = ''): Html {
  return new Html(parts.map(render).join(render(sep)));
}

/**
 * A same-origin path: fixed segments as given, dynamic ones percent-encoded, and an optional
 * query. The result is a relative URL that can never leave the origin or change scheme.
 */
export function path(fixed: string, ...segments: string[]): string {
  if (!fixed.startsWith('/') || fixed.startsWith('//')) throw new Error(`not a same-origin path: ${fixed}`);
  return [fixed.replace(/\/+$/, ''), ...segments.map((s) => encodeURIComponent(s))].join('/') || '/';
}

export function withQuery(p: string, query: Record<string, string | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== '') q.set(k, v);
  const s = q.toString();
  return s ? `${p}?${s}` : p;
}
