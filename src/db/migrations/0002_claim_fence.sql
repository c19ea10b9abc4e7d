-- Which MCP session made the current claim, and the SHA-256 of the lease token when the
-- claimer asked for a fence (several workers sharing one endpoint credential act as one owner).
alter table todos add column claimed_session_id text;
alter table todos add column lease_token_hash text;
