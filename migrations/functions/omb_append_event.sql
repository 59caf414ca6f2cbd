-- The one way an event enters an installation's queue: the next position, then the row. The
-- caller holds the installation's row lock (taken before its dedupe check), so positions are
-- allocated and committed in order and stay contiguous per installation: a position missing
-- between a cursor and the first event still kept can only have been removed by retention,
-- which is how a poll knows to say `gap` (src/events/queue.ts).
--
-- The row lands in the partition of its `received_at` day (or in the default partition when
-- that day has none yet; src/events/retention.ts creates them ahead).
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
  UPDATE installations i SET last_event_position = i.last_event_position + 1
   WHERE i.id = p_installation RETURNING i.last_event_position INTO v_position;
  INSERT INTO events (installation_id, position, id, type, trigger_id, automation_id, toolkit, trigger_slug,
                      connected_account_id, received_at, data)
    VALUES (p_installation, v_position, p_id, p_type, p_trigger_id, p_automation_id, p_toolkit, p_trigger_slug,
            p_connected_account_id, p_received_at, p_data);
  RETURN v_position;
END;
$$;
