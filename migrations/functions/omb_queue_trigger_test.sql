-- One `trigger.test` event into an installation's queue (POST /v1/triggers/{id}/test,
-- src/triggers/test-event.ts), in one round trip, without Composio.
--
-- The event has the shape of a `trigger.event` for the same trigger (its data is a sample payload
-- the caller passes); its type says it is a test; its id is broker-made (`omb:trigger.test:…`), apart
-- from webhook ids. Like every append it locks the installation's row, then enters the queue through
-- omb_append_event, so positions commit in order and stay contiguous.
--
-- Test events never count against the quota (`kept`/`skipped`): they have their own small daily
-- allowance, counted in `daily_usage.test_events` under the same lock.
--
-- No NOTIFY here: the caller notifies after commit (src/queue/notifier.ts), as ingest does.
CREATE OR REPLACE FUNCTION omb_queue_trigger_test(
  p_installation uuid,
  p_trigger uuid,
  p_event_id text,
  p_data jsonb,
  p_received_at timestamptz,
  p_day date,
  -- test events allowed per installation per UTC day (TRIGGER_TESTS_PER_DAY)
  p_allowance integer,
  -- 'queued', 'unknown_trigger' (not this installation's) or 'over_allowance'
  OUT outcome text,
  -- test events of the day so far, this one included when queued
  OUT used integer
) LANGUAGE plpgsql AS $$
DECLARE
  t record;
BEGIN
  PERFORM 1 FROM installations i WHERE i.id = p_installation FOR NO KEY UPDATE;
  IF NOT FOUND THEN
    outcome := 'unknown_trigger';
    RETURN;
  END IF;
  SELECT tr.id, tr.automation_id, tr.toolkit, tr.trigger_slug, tr.connected_account_id
    INTO t
    FROM triggers tr
   WHERE tr.id = p_trigger AND tr.installation_id = p_installation;
  IF NOT FOUND THEN
    outcome := 'unknown_trigger';
    RETURN;
  END IF;

  INSERT INTO daily_usage (installation_id, day) VALUES (p_installation, p_day) ON CONFLICT DO NOTHING;
  UPDATE daily_usage u SET test_events = u.test_events + 1
   WHERE u.installation_id = p_installation AND u.day = p_day AND u.test_events < p_allowance
   RETURNING u.test_events INTO used;
  IF NOT FOUND THEN
    outcome := 'over_allowance';
    used := p_allowance;
    RETURN;
  END IF;

  PERFORM omb_append_event(p_installation, p_event_id, 'trigger.test', t.id, t.automation_id, t.toolkit,
                           t.trigger_slug, t.connected_account_id, p_received_at, p_data);
  outcome := 'queued';
END;
$$;
