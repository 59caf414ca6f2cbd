-- The sealed data of a batch of trigger messages (src/events/intake/ingest-batcher.ts), set aside
-- for the rows the batch is about to append: each message's `sealed` (base64, src/data-keys/seal.ts),
-- by its Composio user and event id, in a temporary table of this session whose rows go at commit,
-- and the transaction marked as sealing. omb_seal_event, the events table's insert trigger, then
-- stores each trigger event's sealed data instead of its clear data. Given as the argument of the
-- ingest function, so it runs first, in the same statement:
--
--   select * from omb_ingest_trigger_batch(omb_stash_sealed($1::text::jsonb))
--
-- Answers the messages unchanged: the ingest functions still read each message's clear `data`
-- (for the trigger's filter) from the statement's parameters, which are never written to a table
-- or the WAL. A temporary table is not written to the WAL either.
CREATE OR REPLACE FUNCTION omb_stash_sealed(p_messages jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN
  IF to_regclass('pg_temp.omb_sealed_stash') IS NULL THEN
    CREATE TEMPORARY TABLE omb_sealed_stash (
      user_id text NOT NULL,
      event_id text NOT NULL,
      sealed bytea NOT NULL,
      PRIMARY KEY (user_id, event_id)
    ) ON COMMIT DELETE ROWS;
  END IF;
  -- The same event twice for one user: one row (dedupe keeps one of them anyway).
  INSERT INTO pg_temp.omb_sealed_stash (user_id, event_id, sealed)
  SELECT e.value->>'userId', e.value->>'eventId', decode(e.value->>'sealed', 'base64')
    FROM jsonb_array_elements(p_messages) AS e
   WHERE e.value ? 'sealed'
  ON CONFLICT DO NOTHING;
  PERFORM set_config('omb.sealing', 'on', true);
  RETURN p_messages;
END;
$$;
