-- One trigger message into its installation's queue, alone: the path for every message that
-- omb_ingest_trigger_batch_sealed cannot keep together with its installation's others (a
-- redelivery, the same id twice in a batch, a day near its quota), and for a message that failed
-- in a batch.
--
-- Ordering: every path that appends an event first locks the installation's row and allocates the
-- position with `last_event_position + 1`. The lock is held until commit, so a later position can
-- only be allocated once the earlier one has committed: positions become visible in order per
-- installation, and a poller that has read position N never later misses a smaller one. Other
-- installations are not blocked.
--
-- Whether the message is kept at all comes first (omb_trigger_message_refusal_sealed), then dedupe by
-- event id within the installation (omb_events_seen), then the quota, so a redelivery never
-- consumes quota. Dedupe is checked once, under the installation's lock, so a concurrent
-- redelivery of the same event waits and then sees it: the lock, not an index, is what makes it
-- exactly once. (Not before the lock too: for a new event, which nearly every webhook is, that
-- would probe the dedupe index of every day in the window twice.)
--
-- Events enter the queue through omb_append_events_sealed (omb_append_event for the day's
-- `quota.exceeded`). The shapes of the events queued here are built here: `trigger.event` carries
-- Composio's data as it came, sealed by the broker when `p_sealed` is given (stored instead of
-- `p_data`, which the trigger's filter still reads; with `p_sealed`, `p_data` may be null, and
-- the answer is then `needs_data` if the filter reads it); `quota.exceeded` the day, the limit
-- and when it resets. The caller names the day the message counts in, when that day resets and the id of
-- its `quota.exceeded` event (src/events/intake/ingest.ts): every UTC day boundary and every
-- broker-made id is built there.
--
-- No NOTIFY here: pg_notify serialises commits database-wide. Ingest notifies after commit,
-- coalesced per installation (src/events/queue/notifier.ts).
CREATE OR REPLACE FUNCTION omb_ingest_trigger_alone_sealed(
  p_event_id text,
  p_composio_trigger_id text,
  p_user_id text,
  p_data jsonb,
  -- the data sealed (src/data-keys/seal.ts), stored instead of p_data; null: stored in clear
  p_sealed bytea,
  p_received_at timestamptz,
  -- the UTC day the quota counts the message in, and when that day's quota resets (ISO text)
  p_day date,
  p_resets_at text,
  -- the id of the day's `quota.exceeded` event
  p_quota_event_id text,
  -- kept events per day on each plan (QUOTA_STANDARD, QUOTA_PAID)
  p_quota_standard integer,
  p_quota_paid integer,
  OUT outcome text,
  OUT installation uuid,
  -- the type of the event this message queued, null when it queued none
  OUT queued text
) LANGUAGE plpgsql AS $$
DECLARE
  t record;
  v_kept integer;
  v_notified boolean;
  v_limit integer;
BEGIN
  IF p_data IS NULL AND p_sealed IS NULL THEN
    RAISE EXCEPTION 'omb_ingest_trigger_alone_sealed: event % has neither data nor sealed data', p_event_id;
  END IF;
  SELECT tr.id, tr.installation_id, tr.automation_id, tr.toolkit, tr.trigger_slug, tr.connected_account_id,
         tr.filter, tr.enabled, i.composio_user_id
    INTO t
    FROM triggers tr JOIN installations i ON i.id = tr.installation_id
   WHERE tr.composio_trigger_id = p_composio_trigger_id;
  IF NOT FOUND THEN
    outcome := 'unknown_trigger';
    RETURN;
  END IF;
  installation := t.installation_id;
  outcome := omb_trigger_message_refusal_sealed(t.composio_user_id, p_user_id, t.enabled, t.toolkit, t.filter, p_data);
  IF outcome IS NOT NULL THEN
    RETURN;
  END IF;

  PERFORM 1 FROM installations i WHERE i.id = t.installation_id FOR NO KEY UPDATE;
  IF EXISTS (SELECT 1 FROM omb_events_seen(ARRAY[t.installation_id], ARRAY[p_event_id], ARRAY[p_received_at])) THEN
    outcome := 'duplicate';
    RETURN;
  END IF;

  -- Under the installation lock nobody else counts this installation's day: read, decide, count.
  SELECT u.kept, u.exceeded_notified INTO v_kept, v_notified
    FROM daily_usage u WHERE u.installation_id = t.installation_id AND u.day = p_day;
  IF NOT FOUND THEN
    v_kept := 0;
    v_notified := false;
  END IF;

  -- Below the smaller limit the plan cannot matter, so it is looked up only near a limit.
  v_limit := NULL;
  IF v_kept >= least(p_quota_standard, p_quota_paid) THEN
    v_limit := CASE WHEN EXISTS (SELECT 1 FROM omb_paid_plans(p_received_at) p WHERE p.installation_id = t.installation_id)
                    THEN p_quota_paid ELSE p_quota_standard END;
  END IF;

  IF v_limit IS NOT NULL AND v_kept >= v_limit THEN
    INSERT INTO daily_usage AS u (installation_id, day, skipped, exceeded_notified) VALUES (t.installation_id, p_day, 1, true)
      ON CONFLICT (installation_id, day) DO UPDATE SET skipped = u.skipped + 1, exceeded_notified = true;
    INSERT INTO trigger_daily_usage AS d (trigger_id, day, skipped, skipped_reason)
      VALUES (t.id, p_day, 1, 'daily_limit')
      ON CONFLICT (trigger_id, day) DO UPDATE SET skipped = d.skipped + 1, skipped_reason = 'daily_limit';
    -- The first skip of the day tells the installation once; it is not a kept event.
    IF NOT v_notified THEN
      PERFORM omb_append_event(t.installation_id, p_quota_event_id, 'quota.exceeded', NULL, NULL, NULL,
                               NULL, NULL, p_received_at,
                               jsonb_build_object('day', p_day, 'eventsPerDay', v_limit, 'resetsAt', p_resets_at));
      queued := 'quota.exceeded';
    END IF;
    outcome := 'over_quota';
    RETURN;
  END IF;

  IF (SELECT count(*) FROM omb_append_events_sealed(ARRAY[t.installation_id], ARRAY[p_event_id], ARRAY['trigger.event'], ARRAY[t.id],
                                                     ARRAY[t.automation_id], ARRAY[t.toolkit], ARRAY[t.trigger_slug],
                                                     ARRAY[t.connected_account_id], ARRAY[p_received_at], ARRAY[p_data],
                                                     ARRAY[p_sealed])) <> 1 THEN
    RAISE EXCEPTION 'omb_ingest_trigger_alone_sealed: the event was not appended';
  END IF;
  PERFORM omb_count_kept_events(ARRAY[t.installation_id], ARRAY[t.id], ARRAY[p_day]);
  outcome := 'accepted';
  queued := 'trigger.event';
END;
$$;
