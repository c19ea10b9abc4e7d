import { WAIT_BINS } from '../../domain/history.ts';

/**
 * SQL for the elementwise sum of a group's claim-wait histograms (null when the group has none):
 * one native sum() per bin. The same sum as history_hist_sum(array_agg(col)), whose pairwise adds
 * in PL/pgSQL cost 9 of the 12 s an hour rollup over 1,000 busy endpoints took (bench/history.ts);
 * this, under a second. For an aggregate query's select list (`col` is trusted, not user input).
 */
export function histSumSql(col: string): string {
  const bins = Array.from({ length: WAIT_BINS }, (_, i) => `coalesce(sum(${col}[${i + 1}]), 0)`);
  return `case when count(${col}) > 0 then array[${bins.join(', ')}]::integer[] end`;
}

/**
 * SQL for the claim-wait histogram of a group's bins (a row per claim, migration 0032; null when
 * the group has none): one native count per bin. For an aggregate query's select list.
 */
export function histOfBinsSql(col: string): string {
  const bins = Array.from({ length: WAIT_BINS }, (_, i) => `count(*) filter (where ${col} = ${i})`);
  return `case when count(${col}) > 0 then array[${bins.join(', ')}]::integer[] end`;
}
