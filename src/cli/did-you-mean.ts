import type { EndpointView } from '../api/wire.ts';

/** Edit distance (insertions, deletions, substitutions), case-insensitive. */
export function editDistance(a: string, b: string): number {
  const s = a.toLowerCase();
  const t = b.toLowerCase();
  let previous = Array.from({ length: t.length + 1 }, (_, j) => j);
  for (let i = 1; i <= s.length; i++) {
    const row = [i];
    for (let j = 1; j <= t.length; j++) {
      row[j] = Math.min(previous[j]! + 1, row[j - 1]! + 1, previous[j - 1]! + (s[i - 1] === t[j - 1] ? 0 : 1));
    }
    previous = row;
  }
  return previous[t.length]!;
}

/**
 * The slugs a mistyped endpoint reference most likely meant: every endpoint whose agent name is
 * the reference (people type the name they vended, not the slug with its suffix), else those
 * whose name or slug is nearest, within a third of the reference's length. Active endpoints first.
 */
export function suggestEndpoints(ref: string, endpoints: readonly Pick<EndpointView, 'slug' | 'agent_name' | 'state'>[], max = 3): string[] {
  const ranked = (list: typeof endpoints) => [...list].sort((a, b) => Number(a.state !== 'active') - Number(b.state !== 'active')).map((e) => e.slug);
  const named = endpoints.filter((e) => e.agent_name.toLowerCase() === ref.toLowerCase());
  if (named.length > 0) return ranked(named).slice(0, max);
  const scored = endpoints.map((e) => ({ e, d: Math.min(editDistance(ref, e.agent_name), editDistance(ref, e.slug)) }));
  const best = Math.min(...scored.map((s) => s.d));
  if (!Number.isFinite(best) || best > Math.max(2, Math.floor(ref.length / 3))) return [];
  return ranked(scored.filter((s) => s.d === best).map((s) => s.e)).slice(0, max);
}
