-- The previous release's ingest path, kept only so that its processes go on ingesting while a
-- rolling deploy replaces them: nothing in this release calls it (omb_ingest_trigger_batch and
-- omb_ingest_trigger_alone replaced it, with the trigger's filter decided in the database). The
-- next release drops it, with omb_ingest_trigger_message and omb_event_seen.
--
-- One trigger message into its installation's queue, the careful way (src/intake/ingest.ts,
-- through omb_ingest_trigger_messages, which keeps plainly clean installations' messages
-- together itself and sends every other message here, one at a time).
--
-- Ordering: every path that appends an event first locks the installation's row and allocates the
-- position with `last_event_position + 1`. The lock is held until commit, so a later position can
-- only be allocated once the earlier one has committed: positions become visible in order per
-- installation, and a poller that has read position N never later misses a smaller one. Other
-- installations are not blocked.
--
-- Dedupe by event id within the installation (omb_event_seen) comes before the quota, so a
-- redelivery never consumes quota. It is checked once, under the installation's lock, so a
-- concurrent redelivery of the same event waits and then sees it: the lock, not an index, is
-- what makes it exactly once. (Not before the lock too: for a new event, which nearly every
-- webhook is, that would probe the dedupe index of every day in the window twice.)
--
-- Events enter the queue through omb_append_event alone.
--
-- The shapes of the events queued here are built here: `trigger.event` carries Composio's data
-- as it came, `quota.exceeded` the day, the limit and when it resets.
--
-- No NOTIFY here: pg_notify serialises commits database-wide. Ingest notifies after commit,
-- coalesced per installation (src/queue/notifier.ts).
CREATE OR REPLACE FUNCTION omb_ingest_trigger_message(
  p_event_id text,
  p_composio_trigger_id text,
  p_user_id text,
  p_data jsonb,
  p_received_at timestamptz,
  p_day date,
  -- true once the caller has applied the trigger's filter (see outcome `check_filter`)
  p_filter_checked boolean,
  -- kept events per day on each plan (QUOTA_STANDARD, QUOTA_PAID)
  p_quota_standard integer,
  p_quota_paid integer,
  OUT outcome text,
  OUT installation uuid,
  OUT trigger_toolkit text,
  OUT trigger_filter jsonb,
  -- the type of the event this message queued, null when it queued none
  OUT queued text
) LANGUAGE plpgsql AS $$
DECLARE
  t record;
  v_kept integer;
  v_notified boolean;
  v_limit integer;
BEGIN
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
  trigger_toolkit := t.toolkit;
  IF t.composio_user_id <> p_user_id THEN
    outcome := 'user_mismatch';
    RETURN;
  END IF;
  IF NOT t.enabled THEN
    outcome := 'paused';
    RETURN;
  END IF;
  -- The filter is applied by the caller (src/triggers/filter.ts); an empty one matches everything.
  IF NOT p_filter_checked AND t.filter <> '{}'::jsonb THEN
    outcome := 'check_filter';
    trigger_filter := t.filter;
    RETURN;
  END IF;

  PERFORM 1 FROM installations i WHERE i.id = t.installation_id FOR NO KEY UPDATE;
  IF omb_event_seen(t.installation_id, p_event_id, p_received_at) THEN
    outcome := 'duplicate';
    RETURN;
  END IF;

  -- Under the installation lock nobody else counts this installation's day: read, decide, count.
  SELECT u.kept, u.exceeded_notified INTO v_kept, v_notified
    FROM daily_usage u WHERE u.installation_id = t.installation_id AND u.day = p_day;
  IF NOT FOUND THEN
    INSERT INTO daily_usage (installation_id, day) VALUES (t.installation_id, p_day) ON CONFLICT DO NOTHING;
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
    UPDATE daily_usage u SET skipped = u.skipped + 1, exceeded_notified = true
     WHERE u.installation_id = t.installation_id AND u.day = p_day;
    INSERT INTO trigger_daily_usage AS d (trigger_id, day, skipped, skipped_reason)
      VALUES (t.id, p_day, 1, 'daily_limit')
      ON CONFLICT (trigger_id, day) DO UPDATE SET skipped = d.skipped + 1, skipped_reason = 'daily_limit';
    -- The first skip of the day tells the installation once; it is not a kept event.
    IF NOT v_notified THEN
      -- A broker-made id: `omb:` is refused in a webhook-id, so no webhook can share it.
      PERFORM omb_append_event(t.installation_id, 'omb:quota.exceeded:' || p_day, 'quota.exceeded', NULL, NULL, NULL,
                               NULL, NULL, p_received_at,
                               jsonb_build_object('day', p_day, 'eventsPerDay', v_limit,
                                                  'resetsAt', to_char((p_day + 1)::timestamp, 'YYYY-MM-DD') || 'T00:00:00.000Z'));
      queued := 'quota.exceeded';
    END IF;
    outcome := 'over_quota';
    RETURN;
  END IF;

  PERFORM omb_append_event(t.installation_id, p_event_id, 'trigger.event', t.id, t.automation_id, t.toolkit,
                           t.trigger_slug, t.connected_account_id, p_received_at, p_data);
  UPDATE daily_usage u SET kept = u.kept + 1 WHERE u.installation_id = t.installation_id AND u.day = p_day;
  INSERT INTO trigger_daily_usage AS d (trigger_id, day, kept) VALUES (t.id, p_day, 1)
    ON CONFLICT (trigger_id, day) DO UPDATE SET kept = d.kept + 1;
  outcome := 'accepted';
  queued := 'trigger.event';
END;
$$;
