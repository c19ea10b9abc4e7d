-- Queue history for the board's charts (issue 39): per endpoint, per queue and per time bucket,
-- what happened to todos and doorbells. Written by statement-level triggers on the tables whose
-- rows ARE the events (todos, doorbell_rings), so every path that changes them counts, exactly,
-- in the same transaction, on every instance; bucketed by the rows' own timestamps (the
-- application's clock). Synthetic (self-test) todos and rings are excluded. The triggers only
-- append to todo_history_delta (no upsert, so no row lock that two writers to one queue could
-- wait on, whatever their transactions hold open); the history loop folds closed minutes of
-- deltas into todo_history, and reads add the deltas not folded yet.
--   width 'm': one minute, kept 48 hours; width 'h': one hour, kept 30 days (rolled up from minutes).
--   pending / claimed_depth: the depth at the bucket's end, snapshotted by the history loop.
--   wait_hist: claim waits (created -> claimed) counted in 48 bins; bin i holds waits below
--   100 ms * 1.5^i (the last bin, everything longer). p50/p95 are read from it.
CREATE TABLE todo_history (
  width          char(1) NOT NULL CHECK (width IN ('m', 'h')),
  bucket         timestamptz NOT NULL,
  endpoint_id    uuid NOT NULL REFERENCES endpoints (id) ON DELETE CASCADE,
  queue          text NOT NULL,
  created        integer NOT NULL DEFAULT 0,
  claimed        integer NOT NULL DEFAULT 0,
  completed      integer NOT NULL DEFAULT 0,
  failed         integer NOT NULL DEFAULT 0,
  dead           integer NOT NULL DEFAULT 0,
  pending        integer,
  claimed_depth  integer,
  wait_hist      integer[],
  rings_sent     integer NOT NULL DEFAULT 0,
  heard_claim    integer NOT NULL DEFAULT 0,
  heard_ack      integer NOT NULL DEFAULT 0,
  unheard        integer NOT NULL DEFAULT 0,
  digests        integer NOT NULL DEFAULT 0,
  PRIMARY KEY (width, endpoint_id, bucket, queue)
);
CREATE INDEX todo_history_bucket_idx ON todo_history (width, bucket);

-- What the triggers append: minute counts not folded into todo_history yet.
CREATE TABLE todo_history_delta (
  bucket       timestamptz NOT NULL,
  endpoint_id  uuid NOT NULL REFERENCES endpoints (id) ON DELETE CASCADE,
  queue        text NOT NULL,
  created      integer NOT NULL DEFAULT 0,
  claimed      integer NOT NULL DEFAULT 0,
  completed    integer NOT NULL DEFAULT 0,
  failed       integer NOT NULL DEFAULT 0,
  dead         integer NOT NULL DEFAULT 0,
  wait_hist    integer[],
  rings_sent   integer NOT NULL DEFAULT 0,
  heard_claim  integer NOT NULL DEFAULT 0,
  heard_ack    integer NOT NULL DEFAULT 0,
  unheard      integer NOT NULL DEFAULT 0,
  digests      integer NOT NULL DEFAULT 0
);
CREATE INDEX todo_history_delta_endpoint_idx ON todo_history_delta (endpoint_id, bucket);
CREATE INDEX todo_history_delta_bucket_idx ON todo_history_delta (bucket);

-- Elementwise sum of two histograms (either may be null).
CREATE FUNCTION history_hist_add(a integer[], b integer[]) RETURNS integer[]
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN a IS NULL THEN b WHEN b IS NULL THEN a ELSE
    (SELECT array_agg(coalesce(x, 0) + coalesce(y, 0) ORDER BY i) FROM unnest(a, b) WITH ORDINALITY AS t(x, y, i)) END
$$;

-- The histogram of a set of waits (milliseconds).
CREATE FUNCTION history_hist_of(waits double precision[]) RETURNS integer[]
LANGUAGE sql IMMUTABLE AS $$
  SELECT array_agg(coalesce(c.n, 0)::integer ORDER BY b.i)
  FROM generate_series(0, 47) AS b(i)
  LEFT JOIN (
    SELECT least(47, greatest(0, ceil(ln(greatest(w, 1) / 100.0) / ln(1.5))))::integer AS i, count(*) AS n
    FROM unnest(waits) AS w GROUP BY 1
  ) c ON c.i = b.i
$$;

CREATE FUNCTION todo_history_on_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO todo_history_delta (bucket, endpoint_id, queue, created)
  SELECT date_trunc('minute', n.created_at), n.endpoint_id, n.queue, count(*)
  FROM new_rows n WHERE NOT n.synthetic
  GROUP BY 1, 2, 3;
  RETURN NULL;
END $$;

CREATE FUNCTION todo_history_on_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  -- Claims, counted in the minute of the claim, with their wait since the todo was created.
  INSERT INTO todo_history_delta (bucket, endpoint_id, queue, claimed, wait_hist)
  SELECT date_trunc('minute', n.claimed_at), n.endpoint_id, n.queue, count(*),
         history_hist_of(array_agg((extract(epoch FROM (n.claimed_at - n.created_at)) * 1000)::double precision))
  FROM new_rows n JOIN old_rows o ON o.id = n.id
  WHERE NOT n.synthetic AND n.state = 'claimed' AND o.state <> 'claimed' AND n.claimed_at IS NOT NULL
  GROUP BY 1, 2, 3;
  -- Finishes: done, failed (each failure), and dead letters (failed with no retry left).
  INSERT INTO todo_history_delta (bucket, endpoint_id, queue, completed, failed, dead)
  SELECT date_trunc('minute', n.updated_at), n.endpoint_id, n.queue,
         count(*) FILTER (WHERE n.state = 'done'),
         count(*) FILTER (WHERE n.state = 'failed'),
         count(*) FILTER (WHERE n.state = 'failed' AND n.next_retry_at IS NULL)
  FROM new_rows n JOIN old_rows o ON o.id = n.id
  WHERE NOT n.synthetic AND n.state IN ('done', 'failed') AND o.state NOT IN ('done', 'failed')
  GROUP BY 1, 2, 3;
  RETURN NULL;
END $$;

CREATE TRIGGER todo_history_insert AFTER INSERT ON todos REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION todo_history_on_insert();
CREATE TRIGGER todo_history_update AFTER UPDATE ON todos REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION todo_history_on_update();

-- Doorbells, in the minute they were sent: todo rings and digests; heard (by claim or ack) and
-- unheard are counted in the ring's own minute, so a bucket says how its rings fared.
CREATE FUNCTION ring_history_on_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO todo_history_delta (bucket, endpoint_id, queue, rings_sent, digests)
  SELECT date_trunc('minute', n.sent_at), n.endpoint_id, coalesce(n.queue, ''),
         count(*) FILTER (WHERE n.kind = 'todo'), count(*) FILTER (WHERE n.kind = 'digest')
  FROM new_rows n WHERE NOT n.synthetic AND n.kind IN ('todo', 'digest')
  GROUP BY 1, 2, 3;
  RETURN NULL;
END $$;

CREATE FUNCTION ring_history_on_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO todo_history_delta (bucket, endpoint_id, queue, heard_claim, heard_ack, unheard)
  SELECT date_trunc('minute', n.sent_at), n.endpoint_id, coalesce(n.queue, ''),
         count(*) FILTER (WHERE o.acked_at IS NULL AND n.acked_at IS NOT NULL AND n.ack_via = 'claim'),
         count(*) FILTER (WHERE o.acked_at IS NULL AND n.acked_at IS NOT NULL AND n.ack_via = 'ack'),
         count(*) FILTER (WHERE o.unheard_at IS NULL AND n.unheard_at IS NOT NULL)
  FROM new_rows n JOIN old_rows o ON o.ring_id = n.ring_id
  WHERE NOT n.synthetic AND n.kind IN ('todo', 'digest')
    AND ((o.acked_at IS NULL AND n.acked_at IS NOT NULL) OR (o.unheard_at IS NULL AND n.unheard_at IS NOT NULL))
  GROUP BY 1, 2, 3;
  RETURN NULL;
END $$;

CREATE TRIGGER ring_history_insert AFTER INSERT ON doorbell_rings REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION ring_history_on_insert();
CREATE TRIGGER ring_history_update AFTER UPDATE ON doorbell_rings REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION ring_history_on_update();

-- The sum of many histograms (the hour rollup).
CREATE FUNCTION history_hist_sum(hists integer[][]) RETURNS integer[]
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  total integer[];
  h integer[];
BEGIN
  IF hists IS NULL THEN RETURN NULL; END IF;
  FOREACH h SLICE 1 IN ARRAY hists LOOP
    total := history_hist_add(total, h);
  END LOOP;
  RETURN total;
END $$;
