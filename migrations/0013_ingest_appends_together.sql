-- Ingest keeps a batch's plainly clean messages together: omb_append_events takes every
-- installation's next positions in one UPDATE and writes every row in one INSERT, and the batch
-- counts each day once per installation and trigger, instead of eight statements per webhook.
-- omb_append_event becomes omb_append_events with one element, so events still enter a queue
-- one way. Current bodies: migrations/functions/omb_append_events.sql, omb_append_event.sql and
-- omb_ingest_trigger_messages.sql (test/events/sql-functions.test.ts).
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
  WITH given AS (
    SELECT g.*, row_number() OVER (PARTITION BY g.installation_id ORDER BY g.ord) AS nth
      FROM unnest(p_installation, p_id, p_type, p_trigger_id, p_automation_id, p_toolkit, p_trigger_slug,
                  p_connected_account_id, p_received_at, p_data) WITH ORDINALITY
           AS g(installation_id, id, type, trigger_id, automation_id, toolkit, trigger_slug, connected_account_id,
                received_at, data, ord)
  ), bumped AS (
    UPDATE installations i SET last_event_position = i.last_event_position + c.n
      FROM (SELECT installation_id, count(*) AS n FROM given GROUP BY installation_id) c
     WHERE i.id = c.installation_id
    RETURNING i.id, i.last_event_position - c.n AS base
  ), placed AS (
    SELECT g.*, b.base + g.nth AS position FROM given g JOIN bumped b ON b.id = g.installation_id
  ), inserted AS (
    INSERT INTO events (installation_id, position, id, type, trigger_id, automation_id, toolkit, trigger_slug,
                        connected_account_id, received_at, data)
    SELECT p.installation_id, p.position, p.id, p.type, p.trigger_id, p.automation_id, p.toolkit, p.trigger_slug,
           p.connected_account_id, p.received_at, p.data
      FROM placed p
  )
  SELECT p.ord::integer, p.position FROM placed p ORDER BY p.ord
$$;
--> statement-breakpoint
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
) RETURNS bigint LANGUAGE sql AS $$
  SELECT a.event_position
    FROM omb_append_events(ARRAY[p_installation], ARRAY[p_id], ARRAY[p_type], ARRAY[p_trigger_id], ARRAY[p_automation_id],
                           ARRAY[p_toolkit], ARRAY[p_trigger_slug], ARRAY[p_connected_account_id], ARRAY[p_received_at],
                           ARRAY[p_data]) a
$$;
--> statement-breakpoint
CREATE OR REPLACE FUNCTION omb_events_seen(p_installation uuid[], p_id text[], p_received_at timestamptz[])
RETURNS TABLE (installation_id uuid, id text) LANGUAGE sql STABLE AS $$
  SELECT g.installation_id, g.id
    FROM unnest(p_installation, p_id, p_received_at) AS g(installation_id, id, received_at)
   CROSS JOIN LATERAL (SELECT 1 FROM events e
                        WHERE e.installation_id = g.installation_id AND e.id = g.id
                          AND e.received_at >= g.received_at - interval '72 hours'
                        LIMIT 1) seen
$$;
--> statement-breakpoint
CREATE OR REPLACE FUNCTION omb_event_seen(p_installation uuid, p_id text, p_received_at timestamptz)
RETURNS boolean LANGUAGE sql STABLE AS $$
  SELECT EXISTS (SELECT 1 FROM omb_events_seen(ARRAY[p_installation], ARRAY[p_id], ARRAY[p_received_at]))
$$;
--> statement-breakpoint
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
    PERFORM omb_append_events(v_installations, v_ids, array_fill('trigger.event'::text, ARRAY[cardinality(v_ords)]),
                              v_triggers, v_automations, v_toolkits, v_slugs, v_accounts, v_received, v_data);
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
