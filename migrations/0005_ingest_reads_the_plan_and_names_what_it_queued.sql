-- Ingest reads the plan through omb_paid_plans in the same round trip (no more `check_plan`
-- asking the broker for it), and each ingest function answers the type of the event it queued.
-- The current body of every function is kept in migrations/functions/<name>.sql; the statements
-- below are copies of those files as of this migration (test/events/sql-functions.test.ts).
-- The output columns change, so the old functions are dropped first.
DROP FUNCTION omb_ingest_trigger_messages(jsonb);
--> statement-breakpoint
DROP FUNCTION omb_ingest_trigger_message(text, text, text, jsonb, timestamptz, date, boolean, integer, integer);
--> statement-breakpoint
DROP FUNCTION omb_ingest_account_expired(text, text, text, text, timestamptz);
--> statement-breakpoint
-- One trigger message into its installation's queue, in ONE round trip (src/events/ingest.ts,
-- usually through omb_ingest_trigger_messages).
--
-- Ordering: every path that appends an event first locks the installation's row and allocates the
-- position with `last_event_position + 1`. The lock is held until commit, so a later position can
-- only be allocated once the earlier one has committed: positions become visible in order per
-- installation, and a poller that has read position N never later misses a smaller one. Other
-- installations are not blocked.
--
-- Dedupe by event id comes before the quota, so a redelivery never consumes quota. The check is
-- repeated under the lock for a concurrent redelivery of the same event.
--
-- The shapes of the events queued here are built here: `trigger.event` carries Composio's data
-- as it came, `quota.exceeded` the day, the limit and when it resets.
--
-- No NOTIFY here: pg_notify serialises commits database-wide. Ingest notifies after commit,
-- coalesced per installation (src/events/notifier.ts).
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
  v_position bigint;
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
  IF EXISTS (SELECT 1 FROM events e WHERE e.id = p_event_id) THEN
    outcome := 'duplicate';
    RETURN;
  END IF;
  -- The filter is applied by the caller (src/triggers/filter.ts); an empty one matches everything.
  IF NOT p_filter_checked AND t.filter <> '{}'::jsonb THEN
    outcome := 'check_filter';
    trigger_filter := t.filter;
    RETURN;
  END IF;

  PERFORM 1 FROM installations i WHERE i.id = t.installation_id FOR NO KEY UPDATE;
  IF EXISTS (SELECT 1 FROM events e WHERE e.id = p_event_id) THEN
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
      UPDATE installations i SET last_event_position = i.last_event_position + 1
       WHERE i.id = t.installation_id RETURNING i.last_event_position INTO v_position;
      INSERT INTO events (installation_id, position, id, type, received_at, data)
        VALUES (t.installation_id, v_position, 'quota.exceeded:' || t.installation_id || ':' || p_day,
                'quota.exceeded', p_received_at,
                jsonb_build_object('day', p_day, 'eventsPerDay', v_limit,
                                   'resetsAt', to_char((p_day + 1)::timestamp, 'YYYY-MM-DD') || 'T00:00:00.000Z'));
      queued := 'quota.exceeded';
    END IF;
    outcome := 'over_quota';
    RETURN;
  END IF;

  UPDATE installations i SET last_event_position = i.last_event_position + 1
   WHERE i.id = t.installation_id RETURNING i.last_event_position INTO v_position;
  INSERT INTO events (installation_id, position, id, type, trigger_id, automation_id, toolkit, trigger_slug,
                      connected_account_id, received_at, data)
    VALUES (t.installation_id, v_position, p_event_id, 'trigger.event', t.id, t.automation_id, t.toolkit,
            t.trigger_slug, t.connected_account_id, p_received_at, p_data);
  UPDATE daily_usage u SET kept = u.kept + 1 WHERE u.installation_id = t.installation_id AND u.day = p_day;
  INSERT INTO trigger_daily_usage AS d (trigger_id, day, kept) VALUES (t.id, p_day, 1)
    ON CONFLICT (trigger_id, day) DO UPDATE SET kept = d.kept + 1;
  outcome := 'accepted';
  queued := 'trigger.event';
END;
$$;
--> statement-breakpoint
-- Several trigger messages in one transaction (src/events/ingest-batcher.ts): one commit, one WAL
-- flush, for as many webhooks as arrived while earlier batches were committing. Each message
-- goes through omb_ingest_trigger_message exactly as it would alone.
--
-- Messages are processed in the order of their installation's id, so concurrent batches take
-- installation row locks in one global order and cannot deadlock one another. Within an
-- installation they keep their order in the batch.
--
-- p_messages: [{eventId, triggerId, userId, data, receivedAt, day, filterChecked, quotaStandard,
-- quotaPaid}, …]; one row comes back per message, `ordinal` being its 1-based index.
CREATE OR REPLACE FUNCTION omb_ingest_trigger_messages(p_messages jsonb)
RETURNS TABLE (
  ordinal integer,
  outcome text,
  installation uuid,
  trigger_toolkit text,
  trigger_filter jsonb,
  queued text
) LANGUAGE plpgsql AS $$
DECLARE
  m record;
  r record;
BEGIN
  FOR m IN
    SELECT e.ordinality::integer AS ord, e.value AS v
      FROM jsonb_array_elements(p_messages) WITH ORDINALITY AS e
      LEFT JOIN triggers tr ON tr.composio_trigger_id = e.value->>'triggerId'
     ORDER BY tr.installation_id NULLS FIRST, e.ordinality
  LOOP
    SELECT * INTO r FROM omb_ingest_trigger_message(
      m.v->>'eventId',
      m.v->>'triggerId',
      m.v->>'userId',
      m.v->'data',
      (m.v->>'receivedAt')::timestamptz,
      (m.v->>'day')::date,
      (m.v->>'filterChecked')::boolean,
      (m.v->>'quotaStandard')::integer,
      (m.v->>'quotaPaid')::integer);
    ordinal := m.ord;
    outcome := r.outcome;
    installation := r.installation;
    trigger_toolkit := r.trigger_toolkit;
    trigger_filter := r.trigger_filter;
    queued := r.queued;
    RETURN NEXT;
  END LOOP;
END;
$$;
--> statement-breakpoint
-- A connected account expired: its triggers need a reconnect, and the installation hears it once
-- through a `connection.expired` event, whose shape is built here. Positions are allocated under
-- the installation's row lock, as in omb_ingest_trigger_message.
CREATE OR REPLACE FUNCTION omb_ingest_account_expired(
  p_event_id text,
  p_connected_account_id text,
  p_user_id text,
  p_toolkit text,
  p_received_at timestamptz,
  OUT outcome text,
  OUT installation uuid,
  -- the type of the event queued, null when none was
  OUT queued text
) LANGUAGE plpgsql AS $$
DECLARE
  v_position bigint;
  v_triggers jsonb;
  v_toolkit text;
BEGIN
  SELECT i.id INTO installation FROM installations i WHERE i.composio_user_id = p_user_id;
  IF NOT FOUND THEN
    outcome := 'unknown_account';
    RETURN;
  END IF;
  IF EXISTS (SELECT 1 FROM events e WHERE e.id = p_event_id) THEN
    outcome := 'duplicate';
    RETURN;
  END IF;

  PERFORM 1 FROM installations i WHERE i.id = installation FOR NO KEY UPDATE;
  IF EXISTS (SELECT 1 FROM events e WHERE e.id = p_event_id) THEN
    outcome := 'duplicate';
    RETURN;
  END IF;

  WITH marked AS (
    UPDATE triggers tr SET needs_reconnect_at = coalesce(tr.needs_reconnect_at, p_received_at)
     WHERE tr.installation_id = installation AND tr.connected_account_id = p_connected_account_id
     RETURNING tr.id, tr.automation_id, tr.trigger_slug, tr.toolkit
  )
  SELECT coalesce(jsonb_agg(jsonb_build_object('triggerId', m.id, 'automationId', m.automation_id,
                                               'triggerSlug', m.trigger_slug) ORDER BY m.automation_id), '[]'::jsonb),
         min(m.toolkit)
    INTO v_triggers, v_toolkit
    FROM marked m;

  UPDATE installations i SET last_event_position = i.last_event_position + 1
   WHERE i.id = installation RETURNING i.last_event_position INTO v_position;
  INSERT INTO events (installation_id, position, id, type, toolkit, connected_account_id, received_at, data)
    VALUES (installation, v_position, p_event_id, 'connection.expired', coalesce(p_toolkit, v_toolkit),
            p_connected_account_id, p_received_at,
            jsonb_build_object('connectedAccountId', p_connected_account_id,
                               'toolkit', coalesce(p_toolkit, v_toolkit), 'triggers', v_triggers));
  outcome := 'accepted';
  queued := 'connection.expired';
END;
$$;
