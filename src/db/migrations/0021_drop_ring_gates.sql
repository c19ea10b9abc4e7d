-- The ring gates are gone (issue 34): a ready todo's one ring across the cluster is decided by the
-- todo's own announcement (todos.last_ringed_by, 0020), and each instance gates its own return
-- digest, as SPEC-0022 asks for one digest per hosting instance rather than one per cluster.
DROP TABLE ring_gates;
