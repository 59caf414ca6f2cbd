-- One event into its installation's queue (a `quota.exceeded`, a `connection.expired`, a test
-- event, a webhook that needed the careful path): omb_append_events with one element, so there
-- is one way events enter a queue. The caller holds the installation's row lock. Answers the
-- event's position; an installation that does not exist is an error, never a silent loss.
CREATE OR REPLACE FUNCTION omb_append_event(
  p_installation uuid,
  p_id text,
  p_type text,
  p_trigger_id uuid,
  p_automation_id text,
  p_toolkit text,
  p_trigger_slug text,
  p_connected_account_id text,
  p_received_at timestamptz,
  p_data jsonb
) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  v_position bigint;
BEGIN
  SELECT a.event_position INTO v_position
    FROM omb_append_events(ARRAY[p_installation], ARRAY[p_id], ARRAY[p_type], ARRAY[p_trigger_id], ARRAY[p_automation_id],
                           ARRAY[p_toolkit], ARRAY[p_trigger_slug], ARRAY[p_connected_account_id], ARRAY[p_received_at],
                           ARRAY[p_data]) a;
  IF v_position IS NULL THEN
    RAISE EXCEPTION 'omb_append_event: installation % does not exist', p_installation;
  END IF;
  RETURN v_position;
END;
$$;
