-- The sealed data of a batch of trigger messages (src/events/intake/ingest-batcher.ts), set aside
-- for the rows the batch is about to append: the sealed data (base64, src/data-keys/seal.ts) of
-- the messages that have some, by their Composio user and event id (three arrays of one length,
-- apart from the messages' JSON, which Postgres then parses without them), in a temporary table of this session whose rows go at commit,
-- and the transaction marked as sealing. omb_seal_event, the events table's insert trigger, then
-- stores each trigger event's sealed data instead of its clear data. Given as the argument of the
-- ingest function, so it runs first, in the same statement:
--
--   select * from omb_ingest_trigger_batch(omb_stash_sealed($1::text::jsonb, $2, $3, $4))
--
-- Answers the messages unchanged: the ingest functions still read each message's clear `data`
-- (for the trigger's filter) from the statement's parameters, which are never written to a table
-- or the WAL. A temporary table is not written to the WAL either.
CREATE OR REPLACE FUNCTION omb_stash_sealed(p_messages jsonb, p_user_ids text[], p_event_ids text[], p_sealed text[])
RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN
  IF to_regclass('pg_temp.omb_sealed_stash') IS NULL THEN
    -- No index: emptying the table at commit rebuilds its indexes, after which the session plans
    -- this insert and omb_seal_event's lookup again, for every batch (pg_stat_statements counted
    -- a plan of each per batch with a primary key here, none without). A batch stashes at most a
    -- hundred rows (IngestBatcher's batches).
    CREATE TEMPORARY TABLE omb_sealed_stash (
      user_id text NOT NULL,
      event_id text NOT NULL,
      sealed bytea NOT NULL
    ) ON COMMIT DELETE ROWS;
  END IF;
  -- The same event twice for one user: one row, the first one's (dedupe keeps the first).
  INSERT INTO pg_temp.omb_sealed_stash (user_id, event_id, sealed)
  SELECT DISTINCT ON (s.user_id, s.event_id) s.user_id, s.event_id, decode(s.sealed, 'base64')
    FROM unnest(p_user_ids, p_event_ids, p_sealed) WITH ORDINALITY AS s(user_id, event_id, sealed, ord)
   ORDER BY s.user_id, s.event_id, s.ord;
  PERFORM set_config('omb.sealing', 'on', true);
  RETURN p_messages;
END;
$$;
