-- history_hist_of (migration 0025) again, in PL/pgSQL: the same 48 bins, counted in one pass.
-- As a SQL function whose body is a query it cannot be inlined, so every statement that called it
-- (the claim trigger, once per claiming statement) planned its generate_series, join and
-- aggregate again: 0.7-0.8 ms of a claim + complete's 1.1-1.25 ms extra with the triggers, one
-- todo at a time (bench/history.ts; docs/performance.md). PL/pgSQL keeps its plans for the session.
CREATE OR REPLACE FUNCTION history_hist_of(waits double precision[]) RETURNS integer[]
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  hist integer[] := array_fill(0, ARRAY[48]);
  w double precision;
  i integer;
BEGIN
  IF waits IS NULL THEN RETURN hist; END IF;
  FOREACH w IN ARRAY waits LOOP
    i := least(47, greatest(0, ceil(ln(greatest(w, 1) / 100.0) / ln(1.5))))::integer;
    hist[i + 1] := hist[i + 1] + 1;
  END LOOP;
  RETURN hist;
END $$;
