-- Whether the installation already holds an event with this id (omb_events_seen, for one event).
-- Kept only for the previous release's ingest path (omb_ingest_trigger_message), which its
-- processes call while a rolling deploy replaces them; the next release drops it.
CREATE OR REPLACE FUNCTION omb_event_seen(p_installation uuid, p_id text, p_received_at timestamptz)
RETURNS boolean LANGUAGE sql STABLE AS $$
  SELECT EXISTS (SELECT 1 FROM omb_events_seen(ARRAY[p_installation], ARRAY[p_id], ARRAY[p_received_at]))
$$;
