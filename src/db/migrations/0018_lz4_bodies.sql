-- Bodies, payloads and results compressed with lz4 instead of pglz when this server can: TOAST
-- compresses any value over about 2 KB on every write, and a claim reads the payload back. lz4
-- took about a fifth less PostgreSQL CPU per insert of a 75 KB payload (docs/performance.md). A
-- server before 14, or built without lz4, keeps pglz; values already written keep theirs.
DO $$
BEGIN
  IF current_setting('server_version_num')::int >= 140000
     AND EXISTS (SELECT 1 FROM pg_settings WHERE name = 'default_toast_compression' AND 'lz4' = ANY (enumvals)) THEN
    ALTER TABLE todos ALTER COLUMN payload SET COMPRESSION lz4, ALTER COLUMN result SET COMPRESSION lz4;
    ALTER TABLE events ALTER COLUMN payload SET COMPRESSION lz4, ALTER COLUMN headers SET COMPRESSION lz4;
  END IF;
END $$;
