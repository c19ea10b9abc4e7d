-- Queue depth as it changes, not snapshotted (issue 40). The history loop counted every live todo
-- each minute and wrote a row per queue (a grouped count of 1,000,000 pending and 130,000 rows a
-- minute at 100,000 endpoints: 6.6 s, and the hour rollup then re-read two hours of them every
-- minute). Now the triggers append each statement's net change of a queue's pending and claimed
-- counts to todo_depth_delta; the loop folds those into todo_depth (every queue's depth now) and
-- into the changes of their minute and hour buckets (todo_history.pending_change, claimed_change).
-- A read's depth at the end of a point is the depth now less the changes after it, so a point
-- needs no row of its own and a queue that did not change writes nothing.
--
-- Taken under a lock that keeps writers out, so the depth counted here and the changes the new
-- triggers record start from the same rows.
LOCK TABLE todos IN SHARE ROW EXCLUSIVE MODE;

-- Every queue's pending and claimed todos now (synthetic ones excluded), as of the last fold.
CREATE TABLE todo_depth (
  endpoint_id  uuid NOT NULL REFERENCES endpoints (id) ON DELETE CASCADE,
  queue        text NOT NULL,
  pending      integer NOT NULL DEFAULT 0,
  claimed      integer NOT NULL DEFAULT 0,
  PRIMARY KEY (endpoint_id, queue)
);
INSERT INTO todo_depth (endpoint_id, queue, pending, claimed)
SELECT endpoint_id, queue, count(*) FILTER (WHERE state = 'pending'), count(*) FILTER (WHERE state = 'claimed')
FROM todos WHERE state IN ('pending', 'claimed') AND NOT synthetic
GROUP BY endpoint_id, queue;

-- What the triggers append: net changes not folded yet, in the minute of the change (a table of its
-- own: an instance of the version before folds todo_history_delta without these).
CREATE TABLE todo_depth_delta (
  bucket       timestamptz NOT NULL,
  endpoint_id  uuid NOT NULL,
  queue        text NOT NULL,
  pending      integer NOT NULL,
  claimed      integer NOT NULL
);

-- A bucket's net changes (the pending and claimed_depth snapshots are no longer written).
ALTER TABLE todo_history
  ADD COLUMN pending_change integer NOT NULL DEFAULT 0,
  ADD COLUMN claimed_change integer NOT NULL DEFAULT 0;

-- Each trigger is one statement: its counts and, in a CTE, its depth changes. The depth of a row
-- counts where it is live (pending or claimed), in its endpoint and queue.
CREATE OR REPLACE FUNCTION todo_history_on_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  WITH depth AS (
    INSERT INTO todo_depth_delta (bucket, endpoint_id, queue, pending, claimed)
    SELECT date_trunc('minute', n.created_at), n.endpoint_id, n.queue,
           count(*) FILTER (WHERE n.state = 'pending'), count(*) FILTER (WHERE n.state = 'claimed')
    FROM new_rows n WHERE NOT n.synthetic AND n.state IN ('pending', 'claimed')
    GROUP BY 1, 2, 3
  )
  INSERT INTO todo_history_delta (bucket, endpoint_id, queue, created)
  SELECT date_trunc('minute', n.created_at), n.endpoint_id, n.queue, count(*)
  FROM new_rows n WHERE NOT n.synthetic
  GROUP BY 1, 2, 3;
  RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION todo_history_on_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  WITH moved AS MATERIALIZED (
    -- Rows whose state (or place) changed: a heartbeat or a ring's charge moves nothing.
    SELECT n.endpoint_id, n.queue, n.state, n.claimed_at, n.created_at, n.updated_at, n.next_retry_at,
           o.endpoint_id AS old_endpoint_id, o.queue AS old_queue, o.state AS old_state
    FROM new_rows n JOIN old_rows o ON o.id = n.id
    WHERE NOT n.synthetic AND (n.state <> o.state OR n.queue <> o.queue OR n.endpoint_id <> o.endpoint_id)
  ), depth AS (
    INSERT INTO todo_depth_delta (bucket, endpoint_id, queue, pending, claimed)
    SELECT date_trunc('minute', c.updated_at), c.endpoint_id, c.queue, sum(c.p), sum(c.c)
    FROM (
      SELECT updated_at, endpoint_id, queue, (state = 'pending')::int AS p, (state = 'claimed')::int AS c
      FROM moved WHERE state IN ('pending', 'claimed')
      UNION ALL
      SELECT updated_at, old_endpoint_id, old_queue, -(old_state = 'pending')::int, -(old_state = 'claimed')::int
      FROM moved WHERE old_state IN ('pending', 'claimed')
    ) c
    GROUP BY 1, 2, 3 HAVING sum(c.p) <> 0 OR sum(c.c) <> 0
  ), claims AS (
    -- Claims, counted in the minute of the claim, with their wait since the todo was created.
    INSERT INTO todo_history_delta (bucket, endpoint_id, queue, claimed, wait_hist)
    SELECT date_trunc('minute', m.claimed_at), m.endpoint_id, m.queue, count(*),
           history_hist_of(array_agg((extract(epoch FROM (m.claimed_at - m.created_at)) * 1000)::double precision))
    FROM moved m
    WHERE m.state = 'claimed' AND m.old_state <> 'claimed' AND m.claimed_at IS NOT NULL
    GROUP BY 1, 2, 3
  )
  -- Finishes: done, failed (each failure), and dead letters (failed with no retry left).
  INSERT INTO todo_history_delta (bucket, endpoint_id, queue, completed, failed, dead)
  SELECT date_trunc('minute', m.updated_at), m.endpoint_id, m.queue,
         count(*) FILTER (WHERE m.state = 'done'),
         count(*) FILTER (WHERE m.state = 'failed'),
         count(*) FILTER (WHERE m.state = 'failed' AND m.next_retry_at IS NULL)
  FROM moved m
  WHERE m.state IN ('done', 'failed') AND m.old_state NOT IN ('done', 'failed')
  GROUP BY 1, 2, 3;
  RETURN NULL;
END $$;

-- A live todo deleted (not retention's: it deletes finished ones) leaves its queue's depth.
CREATE FUNCTION todo_history_on_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO todo_depth_delta (bucket, endpoint_id, queue, pending, claimed)
  SELECT date_trunc('minute', now()), o.endpoint_id, o.queue,
         -count(*) FILTER (WHERE o.state = 'pending'), -count(*) FILTER (WHERE o.state = 'claimed')
  FROM old_rows o WHERE NOT o.synthetic AND o.state IN ('pending', 'claimed')
  GROUP BY 1, 2, 3;
  RETURN NULL;
END $$;

CREATE TRIGGER todo_history_delete AFTER DELETE ON todos REFERENCING OLD TABLE AS old_rows
  FOR EACH STATEMENT EXECUTE FUNCTION todo_history_on_delete();
