-- The todos page charts the queues of all of a human's endpoints (issue 39). Read from
-- todo_history, that is a day of minutes of every endpoint the human owns: 660 ms at 1,000
-- endpoints and 12.6 s at 10,000 (bench:history). This table holds the same counts summed over
-- the human's endpoints, per width, bucket and queue, so that read is a day of minutes of a few
-- queues whatever the human owns. No claim-wait histogram: the todos page does not draw one.
--
-- Kept by triggers on todo_history, so every writer of it (the history loop's fold, on any
-- instance and of any version since 0032) adds here in the same statement, exactly: an inserted
-- bucket adds its counts, an updated one the difference. Pruned by the history loop on
-- todo_history's keeps. An endpoint's owner never changes in the application; a database whose
-- owners were changed by hand recounts with SELECT todo_history_human_recount().
CREATE TABLE todo_history_human (
  width           char(1) NOT NULL CHECK (width IN ('m', 'h')),
  bucket          timestamptz NOT NULL,
  human_id        uuid NOT NULL REFERENCES humans (id) ON DELETE CASCADE,
  queue           text NOT NULL,
  created         integer NOT NULL DEFAULT 0,
  claimed         integer NOT NULL DEFAULT 0,
  completed       integer NOT NULL DEFAULT 0,
  failed          integer NOT NULL DEFAULT 0,
  dead            integer NOT NULL DEFAULT 0,
  pending_change  integer NOT NULL DEFAULT 0,
  claimed_change  integer NOT NULL DEFAULT 0,
  rings_sent      integer NOT NULL DEFAULT 0,
  heard_claim     integer NOT NULL DEFAULT 0,
  heard_ack       integer NOT NULL DEFAULT 0,
  unheard         integer NOT NULL DEFAULT 0,
  digests         integer NOT NULL DEFAULT 0,
  PRIMARY KEY (human_id, width, bucket, queue)
);
-- The prune's walk, oldest first.
CREATE INDEX todo_history_human_bucket_idx ON todo_history_human (width, bucket);

-- An inserted bucket adds its counts to its owner's; an updated one (the fold adding to it) what
-- it gained, its new counts less its old. One function for both (a trigger with transition tables
-- fires for one event): PL/pgSQL plans a statement when it first runs it, so the INSERT trigger
-- never plans the branch that reads old_rows. The two inserts differ only in their source; handing
-- the rows to one shared insert through jsonb cost a fold of 2,000 queues 57 % (docs/performance.md).
CREATE FUNCTION todo_history_human_on_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    INSERT INTO todo_history_human AS h (width, bucket, human_id, queue, created, claimed, completed, failed, dead,
                                         pending_change, claimed_change, rings_sent, heard_claim, heard_ack, unheard, digests)
    SELECT c.width, c.bucket, a.owner_human_id, c.queue, sum(c.created), sum(c.claimed), sum(c.completed), sum(c.failed), sum(c.dead),
           sum(c.pending_change), sum(c.claimed_change), sum(c.rings_sent), sum(c.heard_claim), sum(c.heard_ack), sum(c.unheard), sum(c.digests)
    FROM new_rows c JOIN endpoints e ON e.id = c.endpoint_id JOIN agents a ON a.id = e.agent_id
    GROUP BY 1, 2, 3, 4
    ON CONFLICT (human_id, width, bucket, queue) DO UPDATE SET
      created = h.created + excluded.created, claimed = h.claimed + excluded.claimed, completed = h.completed + excluded.completed,
      failed = h.failed + excluded.failed, dead = h.dead + excluded.dead,
      pending_change = h.pending_change + excluded.pending_change, claimed_change = h.claimed_change + excluded.claimed_change,
      rings_sent = h.rings_sent + excluded.rings_sent, heard_claim = h.heard_claim + excluded.heard_claim,
      heard_ack = h.heard_ack + excluded.heard_ack, unheard = h.unheard + excluded.unheard, digests = h.digests + excluded.digests;
  ELSE
    INSERT INTO todo_history_human AS h (width, bucket, human_id, queue, created, claimed, completed, failed, dead,
                                         pending_change, claimed_change, rings_sent, heard_claim, heard_ack, unheard, digests)
    SELECT n.width, n.bucket, a.owner_human_id, n.queue, sum(n.created - o.created), sum(n.claimed - o.claimed),
           sum(n.completed - o.completed), sum(n.failed - o.failed), sum(n.dead - o.dead),
           sum(n.pending_change - o.pending_change), sum(n.claimed_change - o.claimed_change), sum(n.rings_sent - o.rings_sent),
           sum(n.heard_claim - o.heard_claim), sum(n.heard_ack - o.heard_ack), sum(n.unheard - o.unheard), sum(n.digests - o.digests)
    FROM new_rows n JOIN old_rows o ON (o.width, o.endpoint_id, o.bucket, o.queue) = (n.width, n.endpoint_id, n.bucket, n.queue)
    JOIN endpoints e ON e.id = n.endpoint_id JOIN agents a ON a.id = e.agent_id
    GROUP BY 1, 2, 3, 4
    ON CONFLICT (human_id, width, bucket, queue) DO UPDATE SET
      created = h.created + excluded.created, claimed = h.claimed + excluded.claimed, completed = h.completed + excluded.completed,
      failed = h.failed + excluded.failed, dead = h.dead + excluded.dead,
      pending_change = h.pending_change + excluded.pending_change, claimed_change = h.claimed_change + excluded.claimed_change,
      rings_sent = h.rings_sent + excluded.rings_sent, heard_claim = h.heard_claim + excluded.heard_claim,
      heard_ack = h.heard_ack + excluded.heard_ack, unheard = h.unheard + excluded.unheard, digests = h.digests + excluded.digests;
  END IF;
  RETURN NULL;
END $$;

CREATE TRIGGER todo_history_human_insert AFTER INSERT ON todo_history REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION todo_history_human_on_change();
CREATE TRIGGER todo_history_human_update AFTER UPDATE ON todo_history REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION todo_history_human_on_change();

-- Every human's buckets counted again from todo_history (this migration's fill; after owners were
-- changed by hand).
CREATE FUNCTION todo_history_human_recount() RETURNS void LANGUAGE sql AS $$
  DELETE FROM todo_history_human;
  INSERT INTO todo_history_human (width, bucket, human_id, queue, created, claimed, completed, failed, dead,
                                  pending_change, claimed_change, rings_sent, heard_claim, heard_ack, unheard, digests)
  SELECT h.width, h.bucket, a.owner_human_id, h.queue, sum(h.created), sum(h.claimed), sum(h.completed), sum(h.failed), sum(h.dead),
         sum(h.pending_change), sum(h.claimed_change), sum(h.rings_sent), sum(h.heard_claim), sum(h.heard_ack), sum(h.unheard), sum(h.digests)
  FROM todo_history h JOIN endpoints e ON e.id = h.endpoint_id JOIN agents a ON a.id = e.agent_id
  GROUP BY 1, 2, 3, 4
$$;

-- No fold writes todo_history between the count and the triggers taking over.
LOCK TABLE todo_history IN SHARE ROW EXCLUSIVE MODE;
SELECT todo_history_human_recount();
