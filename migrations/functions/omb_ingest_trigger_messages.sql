-- The previous release's ingest path, kept only so that its processes go on ingesting while a
-- rolling deploy replaces them: nothing in this release calls it (omb_ingest_trigger_batch and
-- omb_ingest_trigger_alone replaced it, with the trigger's filter decided in the database). The
-- next release drops it, with omb_ingest_trigger_message and omb_event_seen.
--
-- Several trigger messages in one transaction (src/events/intake/ingest-batcher.ts): one commit, one WAL
-- flush, for as many webhooks as arrived while earlier batches were committing.
--
-- First every installation the batch routes to is locked, in the order of their ids, so
-- concurrent batches take installation row locks in one global order and cannot deadlock one
-- another. Under those locks, the messages of an installation whose every message is plainly
-- to be kept — its trigger known, enabled and the user's, its filter empty or already applied,
-- no redelivery (omb_events_seen; nor the same id twice in this batch), and the day's count
-- staying within the smaller of the two quotas, so the plan cannot matter — are kept together:
-- one omb_append_events and one update of each day's counters, whatever their number. Every
-- other message goes through omb_ingest_trigger_message one at a time, exactly as it would
-- alone, in the order of its installation's id and, within an installation, in batch order.
-- Either way an installation's messages are appended in the order they came.
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
  v_ords integer[];
  v_installations uuid[];
  v_ids text[];
  v_triggers uuid[];
  v_automations text[];
  v_toolkits text[];
  v_slugs text[];
  v_accounts text[];
  v_received timestamptz[];
  v_days date[];
  v_data jsonb[];
BEGIN
  -- Triggers are looked up through LATERAL … LIMIT 1, an index probe per message: a join would
  -- be planned for jsonb_array_elements' fixed estimate of 100 rows, as a scan of every trigger.
  PERFORM 1 FROM installations i
   WHERE i.id IN (SELECT tr.installation_id
                    FROM jsonb_array_elements(p_messages) AS e
                    CROSS JOIN LATERAL (SELECT t.installation_id FROM triggers t
                                         WHERE t.composio_trigger_id = e.value->>'triggerId' LIMIT 1) tr)
   ORDER BY i.id
     FOR NO KEY UPDATE;

  WITH msg AS (
    SELECT e.ordinality::integer AS ord, e.value->>'eventId' AS event_id,
           (e.value->>'receivedAt')::timestamptz AS received_at, (e.value->>'day')::date AS day, e.value->'data' AS data,
           tr.id AS trigger_id, tr.installation_id, tr.automation_id, tr.toolkit, tr.trigger_slug, tr.connected_account_id,
           (i.composio_user_id = e.value->>'userId' AND tr.enabled
             AND (tr.filter = '{}'::jsonb OR (e.value->>'filterChecked')::boolean)) AS routable,
           least((e.value->>'quotaStandard')::integer, (e.value->>'quotaPaid')::integer) AS below_any_plan
      FROM jsonb_array_elements(p_messages) WITH ORDINALITY AS e
      CROSS JOIN LATERAL (SELECT t.* FROM triggers t WHERE t.composio_trigger_id = e.value->>'triggerId' LIMIT 1) tr
      JOIN installations i ON i.id = tr.installation_id
  ), careful AS (
    SELECT x.installation_id FROM msg x WHERE NOT x.routable
    UNION
    SELECT s.installation_id
      FROM omb_events_seen((SELECT array_agg(x.installation_id ORDER BY x.ord) FROM msg x), (SELECT array_agg(x.event_id ORDER BY x.ord) FROM msg x),
                           (SELECT array_agg(x.received_at ORDER BY x.ord) FROM msg x)) s
    UNION
    SELECT x.installation_id FROM msg x GROUP BY x.installation_id, x.event_id HAVING count(*) > 1
    UNION
    SELECT d.installation_id
      FROM (SELECT x.installation_id, x.day, count(*) AS n, min(x.below_any_plan) AS below_any_plan
              FROM msg x GROUP BY x.installation_id, x.day) d
     WHERE coalesce((SELECT u.kept FROM daily_usage u WHERE u.installation_id = d.installation_id AND u.day = d.day), 0) + d.n
           > d.below_any_plan
  )
  SELECT array_agg(x.ord ORDER BY x.ord), array_agg(x.installation_id ORDER BY x.ord), array_agg(x.event_id ORDER BY x.ord),
         array_agg(x.trigger_id ORDER BY x.ord), array_agg(x.automation_id ORDER BY x.ord), array_agg(x.toolkit ORDER BY x.ord),
         array_agg(x.trigger_slug ORDER BY x.ord), array_agg(x.connected_account_id ORDER BY x.ord),
         array_agg(x.received_at ORDER BY x.ord), array_agg(x.day ORDER BY x.ord), array_agg(x.data ORDER BY x.ord)
    INTO v_ords, v_installations, v_ids, v_triggers, v_automations, v_toolkits, v_slugs, v_accounts, v_received, v_days, v_data
    FROM msg x
   WHERE x.installation_id NOT IN (SELECT c.installation_id FROM careful c);

  IF v_ords IS NOT NULL THEN
    -- Every installation here is locked, so every event is appended; anything else is an error, never a loss.
    IF (SELECT count(*) FROM omb_append_events(v_installations, v_ids, array_fill('trigger.event'::text, ARRAY[cardinality(v_ords)]),
                                               v_triggers, v_automations, v_toolkits, v_slugs, v_accounts, v_received, v_data))
       <> cardinality(v_ords) THEN
      RAISE EXCEPTION 'omb_ingest_trigger_messages: not every event was appended';
    END IF;
    INSERT INTO daily_usage AS u (installation_id, day, kept)
      SELECT k.installation_id, k.day, count(*) FROM unnest(v_installations, v_days) AS k(installation_id, day)
       GROUP BY k.installation_id, k.day
      ON CONFLICT (installation_id, day) DO UPDATE SET kept = u.kept + excluded.kept;
    INSERT INTO trigger_daily_usage AS d (trigger_id, day, kept)
      SELECT k.trigger_id, k.day, count(*) FROM unnest(v_triggers, v_days) AS k(trigger_id, day)
       GROUP BY k.trigger_id, k.day
      ON CONFLICT (trigger_id, day) DO UPDATE SET kept = d.kept + excluded.kept;
    RETURN QUERY
      SELECT k.ord, 'accepted'::text, k.installation_id, k.toolkit, NULL::jsonb, 'trigger.event'::text
        FROM unnest(v_ords, v_installations, v_toolkits) AS k(ord, installation_id, toolkit);
  END IF;

  FOR m IN
    SELECT e.ordinality::integer AS ord, e.value AS v
      FROM jsonb_array_elements(p_messages) WITH ORDINALITY AS e
      LEFT JOIN LATERAL (SELECT t.installation_id FROM triggers t
                          WHERE t.composio_trigger_id = e.value->>'triggerId' LIMIT 1) tr ON true
     WHERE NOT (e.ordinality::integer = ANY (coalesce(v_ords, '{}')))
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
