-- The previous release's (0.1.0's) way events enter queues, with their data in clear: since 0.2.0
-- omb_append_events_sealed with no sealed data, the one body of that rule. Called by the functions
-- both releases share (omb_append_event and 0.1.0's ingest functions); 0.2.0's ingest calls
-- omb_append_events_sealed itself. Answers each event's position, by its 1-based index in the arrays.
CREATE OR REPLACE FUNCTION omb_append_events(
  p_installation uuid[],
  p_id text[],
  p_type text[],
  p_trigger_id uuid[],
  p_automation_id text[],
  p_toolkit text[],
  p_trigger_slug text[],
  p_connected_account_id text[],
  p_received_at timestamptz[],
  p_data jsonb[]
) RETURNS TABLE (ord integer, event_position bigint) LANGUAGE sql AS $$
  SELECT a.ord, a.event_position
    FROM omb_append_events_sealed(p_installation, p_id, p_type, p_trigger_id, p_automation_id, p_toolkit, p_trigger_slug,
                                  p_connected_account_id, p_received_at, p_data, NULL) a
$$;
