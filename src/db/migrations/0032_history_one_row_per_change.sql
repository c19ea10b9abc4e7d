-- The history's triggers cost a claim and a completion too much (issue 39: at most 5 % of push and
-- claim throughput). Each trigger ran one statement of several CTEs (a grouped insert per kind of
-- count, a second table for depth changes, a PL/pgSQL histogram): about 65 us a firing, one todo at
-- a time, where a claim + complete is about 200 us of PostgreSQL's time. Now each trigger is one flat
-- insert of a row per todo (or ring) that changed, into one table, with no grouping, no foreign
-- key and one index: about 24 us a firing (pg_stat_user_functions, the same claim + complete).
-- The history loop does the grouping when it folds a closed minute.
--
-- Taken under a lock that keeps writers out, so the rows moved here and the changes the new
-- triggers record start from the same rows.
LOCK TABLE todos, doorbell_rings IN SHARE ROW EXCLUSIVE MODE;

-- One row per change: its counts, its depth change (pending_change, claimed_change: +1, -1 or 0)
-- and, for a claim, the bin of its wait (history_hist_of's 48 bins) instead of a histogram.
ALTER TABLE todo_history_delta
  ADD COLUMN pending_change integer NOT NULL DEFAULT 0,
  ADD COLUMN claimed_change integer NOT NULL DEFAULT 0,
  ADD COLUMN wait_bin smallint,
  -- The fold skips the rows of an endpoint deleted meanwhile; a key check per inserted row was a
  -- lock of the endpoint's row in every claim.
  DROP CONSTRAINT todo_history_delta_endpoint_id_fkey;
-- The fold reads the whole table (what is not folded yet); reads go by endpoint.
DROP INDEX todo_history_delta_bucket_idx;

-- What the old triggers wrote and the loop has not folded: depth changes, and histograms as bins.
INSERT INTO todo_history_delta (bucket, endpoint_id, queue, pending_change, claimed_change)
SELECT bucket, endpoint_id, queue, pending, claimed FROM todo_depth_delta;
DROP TABLE todo_depth_delta;
INSERT INTO todo_history_delta (bucket, endpoint_id, queue, wait_bin)
SELECT d.bucket, d.endpoint_id, d.queue, (i - 1)::smallint
FROM todo_history_delta d, generate_subscripts(d.wait_hist, 1) i, generate_series(1, d.wait_hist[i])
WHERE d.wait_hist IS NOT NULL;
ALTER TABLE todo_history_delta DROP COLUMN wait_hist;

-- The histogram of one wait's bin (a delta row not folded yet, read beside folded buckets).
CREATE FUNCTION history_one_hot(bin smallint) RETURNS integer[] LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN bin IS NOT NULL THEN array_fill(0, ARRAY[bin::int]) || 1 || array_fill(0, ARRAY[47 - bin]) END
$$;

CREATE OR REPLACE FUNCTION todo_history_on_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO todo_history_delta (bucket, endpoint_id, queue, created, pending_change, claimed_change)
  SELECT date_trunc('minute', n.created_at), n.endpoint_id, n.queue, 1, (n.state = 'pending')::int, (n.state = 'claimed')::int
  FROM new_rows n WHERE NOT n.synthetic;
  RETURN NULL;
END $$;

-- A row per todo whose state changed, in the minute of the change (a claim's updated_at is its
-- claimed_at): a heartbeat or a ring's charge changes no state and writes nothing. A todo never
-- changes endpoint or queue (todos_stay_in_place below), so its depth change is its own queue's.
CREATE OR REPLACE FUNCTION todo_history_on_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO todo_history_delta (bucket, endpoint_id, queue, claimed, completed, failed, dead, pending_change, claimed_change, wait_bin)
  SELECT date_trunc('minute', n.updated_at), n.endpoint_id, n.queue,
         (n.state = 'claimed')::int,
         (n.state = 'done' AND o.state <> 'failed')::int,
         (n.state = 'failed' AND o.state <> 'done')::int,
         (n.state = 'failed' AND o.state <> 'done' AND n.next_retry_at IS NULL)::int,
         (n.state = 'pending')::int - (o.state = 'pending')::int,
         (n.state = 'claimed')::int - (o.state = 'claimed')::int,
         CASE WHEN n.state = 'claimed' AND n.claimed_at IS NOT NULL THEN
           least(47, greatest(0, ceil(ln(greatest(date_part('epoch', n.claimed_at - n.created_at) * 1000, 1) / 100.0) / ln(1.5))))::smallint
         END
  FROM new_rows n JOIN old_rows o ON o.id = n.id
  WHERE NOT n.synthetic AND n.state <> o.state;
  RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION todo_history_on_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO todo_history_delta (bucket, endpoint_id, queue, pending_change, claimed_change)
  SELECT date_trunc('minute', now()), o.endpoint_id, o.queue, -(o.state = 'pending')::int, -(o.state = 'claimed')::int
  FROM old_rows o WHERE NOT o.synthetic AND o.state IN ('pending', 'claimed');
  RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION ring_history_on_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO todo_history_delta (bucket, endpoint_id, queue, rings_sent, digests)
  SELECT date_trunc('minute', n.sent_at), n.endpoint_id, coalesce(n.queue, ''), (n.kind = 'todo')::int, (n.kind = 'digest')::int
  FROM new_rows n WHERE NOT n.synthetic AND n.kind IN ('todo', 'digest');
  RETURN NULL;
END $$;

-- A ring heard or found unheard, one row per ring, as a row-level trigger: the statement-level one
-- ran for every UPDATE of doorbell_rings, and a claim's acknowledgement updates none of them most
-- of the time; the WHEN below is checked without a call.
DROP TRIGGER ring_history_update ON doorbell_rings;
CREATE OR REPLACE FUNCTION ring_history_on_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO todo_history_delta (bucket, endpoint_id, queue, heard_claim, heard_ack, unheard)
  VALUES (date_trunc('minute', NEW.sent_at), NEW.endpoint_id, coalesce(NEW.queue, ''),
          (OLD.acked_at IS NULL AND NEW.acked_at IS NOT NULL AND NEW.ack_via = 'claim')::int,
          (OLD.acked_at IS NULL AND NEW.acked_at IS NOT NULL AND NEW.ack_via = 'ack')::int,
          (OLD.unheard_at IS NULL AND NEW.unheard_at IS NOT NULL)::int);
  RETURN NULL;
END $$;
CREATE TRIGGER ring_history_update AFTER UPDATE ON doorbell_rings FOR EACH ROW
  WHEN (NOT NEW.synthetic AND NEW.kind IN ('todo', 'digest')
        AND ((OLD.acked_at IS NULL AND NEW.acked_at IS NOT NULL) OR (OLD.unheard_at IS NULL AND NEW.unheard_at IS NOT NULL)))
  EXECUTE FUNCTION ring_history_on_update();

-- A todo belongs to its endpoint and queue for life: the history counts a depth change in the
-- todo's own queue. Fires only for a statement that sets one of them (none does today).
CREATE FUNCTION todos_refuse_move() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'a todo does not move to another endpoint or queue (todo %)', OLD.id USING ERRCODE = 'check_violation';
END $$;
CREATE TRIGGER todos_stay_in_place BEFORE UPDATE OF endpoint_id, queue ON todos FOR EACH ROW
  WHEN (OLD.endpoint_id IS DISTINCT FROM NEW.endpoint_id OR OLD.queue IS DISTINCT FROM NEW.queue)
  EXECUTE FUNCTION todos_refuse_move();
