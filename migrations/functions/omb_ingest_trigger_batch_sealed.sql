-- Several trigger messages in one transaction (src/events/intake/ingest-batcher.ts): one commit,
-- one WAL flush, for as many webhooks as arrived while earlier batches were committing.
--
-- First every installation the batch routes to is locked, in the order of their ids, so
-- concurrent batches take installation row locks in one global order and cannot deadlock one
-- another. Under those locks:
-- - a message its trigger refuses (omb_trigger_message_refusal_sealed: another user's, paused,
--   filtered out, or sent without the clear data its trigger's filter reads) is answered so at
--   once: it appends and counts nothing, whatever else the batch holds;
-- - the messages of an installation whose every other message is plainly to be kept — no
--   redelivery (omb_events_seen; nor the same id twice in this batch), and the day's count
--   staying within the smaller of the two quotas, so the plan cannot matter — are kept
--   together: one omb_append_events_sealed and one omb_count_kept_events, whatever their number;
-- - every other message goes through omb_ingest_trigger_alone_sealed one at a time, exactly as it
--   would alone, in the order of its installation's id and, within an installation, in batch order.
-- Either way an installation's messages are appended in the order they came (one answered
-- `needs_data` comes again, with its data, in a later batch: after those of this one).
--
-- p_messages: [{eventId, triggerId, userId, payload, sealed, receivedAt, day, resetsAt,
-- quotaEventId, quotaStandard, quotaPaid}, …] (the arguments of omb_ingest_trigger_alone_sealed).
-- `payload.data` is the delivery's `data`, from the delivery's own text, so every key and number is
-- kept as sent (1e400, __proto__): what the trigger's filter reads, and what is stored when
-- `sealed` is absent. `sealed` (base64, src/data-keys/seal.ts: that text encrypted by the broker,
-- bound to the message's Composio user and event id) is stored instead when present; a message
-- whose user is not the installation's is refused before anything is stored, so sealed data is
-- only ever stored in a row of the installation it is bound to. With `sealed`, `payload` may be
-- left out: the message is then answered `needs_data` if its trigger's filter reads the data.
-- One row comes back per message, `ordinal` being its 1-based index.
--
-- Its statements, and those of the functions it calls, are planned once per connection
-- (`plan_cache_mode`): planned again for each batch's values, as Postgres otherwise does for
-- statements whose plan could depend on them, they cost more than a batch of 30 messages takes
-- to run (omb_events_seen alone, about 0.16 ms). No plan here gains from knowing the values:
-- every message is looked up by index, one probe each, whatever their number.
CREATE OR REPLACE FUNCTION omb_ingest_trigger_batch_sealed(p_messages jsonb)
RETURNS TABLE (
  ordinal integer,
  outcome text,
  installation uuid,
  queued text
) LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
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
  v_sealed bytea[];
  v_refused_ords integer[];
  v_refusals text[];
  v_refused_installations uuid[];
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
           (e.value->>'receivedAt')::timestamptz AS received_at, (e.value->>'day')::date AS day, e.value->'payload'->'data' AS data,
           decode(e.value->>'sealed', 'base64') AS sealed,
           tr.id AS trigger_id, tr.installation_id, tr.automation_id, tr.toolkit, tr.trigger_slug, tr.connected_account_id,
           omb_trigger_message_refusal_sealed(i.composio_user_id, e.value->>'userId', tr.enabled, tr.toolkit, tr.filter,
                                              e.value->'payload'->'data')
             AS refusal,
           least((e.value->>'quotaStandard')::integer, (e.value->>'quotaPaid')::integer) AS below_any_plan
      FROM jsonb_array_elements(p_messages) WITH ORDINALITY AS e
      CROSS JOIN LATERAL (SELECT t.* FROM triggers t WHERE t.composio_trigger_id = e.value->>'triggerId' LIMIT 1) tr
      JOIN installations i ON i.id = tr.installation_id
  ), kept AS (
    SELECT * FROM msg x WHERE x.refusal IS NULL
  ), careful AS MATERIALIZED (
    -- Worked out once (MATERIALIZED): inlined into the NOT IN below, it probed the queue for
    -- redeliveries again for each message of the batch.
    SELECT s.installation_id
      FROM omb_events_seen((SELECT array_agg(x.installation_id ORDER BY x.ord) FROM kept x), (SELECT array_agg(x.event_id ORDER BY x.ord) FROM kept x),
                           (SELECT array_agg(x.received_at ORDER BY x.ord) FROM kept x)) s
    UNION
    SELECT x.installation_id FROM kept x GROUP BY x.installation_id, x.event_id HAVING count(*) > 1
    UNION
    SELECT d.installation_id
      FROM (SELECT x.installation_id, x.day, count(*) AS n, min(x.below_any_plan) AS below_any_plan
              FROM kept x GROUP BY x.installation_id, x.day) d
     WHERE coalesce((SELECT u.kept FROM daily_usage u WHERE u.installation_id = d.installation_id AND u.day = d.day), 0) + d.n
           > d.below_any_plan
  ), sorted AS (
    SELECT x.*, x.refusal IS NULL AND x.installation_id NOT IN (SELECT c.installation_id FROM careful c) AS together FROM msg x
  )
  SELECT array_agg(x.ord ORDER BY x.ord) FILTER (WHERE x.together),
         array_agg(x.installation_id ORDER BY x.ord) FILTER (WHERE x.together),
         array_agg(x.event_id ORDER BY x.ord) FILTER (WHERE x.together),
         array_agg(x.trigger_id ORDER BY x.ord) FILTER (WHERE x.together),
         array_agg(x.automation_id ORDER BY x.ord) FILTER (WHERE x.together),
         array_agg(x.toolkit ORDER BY x.ord) FILTER (WHERE x.together),
         array_agg(x.trigger_slug ORDER BY x.ord) FILTER (WHERE x.together),
         array_agg(x.connected_account_id ORDER BY x.ord) FILTER (WHERE x.together),
         array_agg(x.received_at ORDER BY x.ord) FILTER (WHERE x.together),
         array_agg(x.day ORDER BY x.ord) FILTER (WHERE x.together),
         array_agg(x.data ORDER BY x.ord) FILTER (WHERE x.together),
         array_agg(x.sealed ORDER BY x.ord) FILTER (WHERE x.together),
         array_agg(x.ord ORDER BY x.ord) FILTER (WHERE x.refusal IS NOT NULL),
         array_agg(x.refusal ORDER BY x.ord) FILTER (WHERE x.refusal IS NOT NULL),
         array_agg(x.installation_id ORDER BY x.ord) FILTER (WHERE x.refusal IS NOT NULL)
    INTO v_ords, v_installations, v_ids, v_triggers, v_automations, v_toolkits, v_slugs, v_accounts, v_received, v_days, v_data, v_sealed,
         v_refused_ords, v_refusals, v_refused_installations
    FROM sorted x;

  IF v_refused_ords IS NOT NULL THEN
    RETURN QUERY
      SELECT k.ord, k.refusal, k.installation_id, NULL::text
        FROM unnest(v_refused_ords, v_refusals, v_refused_installations) AS k(ord, refusal, installation_id);
  END IF;

  IF v_ords IS NOT NULL THEN
    IF EXISTS (SELECT 1 FROM unnest(v_data, v_sealed) AS u(data, sealed) WHERE u.data IS NULL AND u.sealed IS NULL) THEN
      RAISE EXCEPTION 'omb_ingest_trigger_batch_sealed: a message has neither data nor sealed data';
    END IF;
    -- Every installation here is locked, so every event is appended; anything else is an error, never a loss.
    IF (SELECT count(*) FROM omb_append_events_sealed(v_installations, v_ids, array_fill('trigger.event'::text, ARRAY[cardinality(v_ords)]),
                                                      v_triggers, v_automations, v_toolkits, v_slugs, v_accounts, v_received, v_data,
                                                      v_sealed))
       <> cardinality(v_ords) THEN
      RAISE EXCEPTION 'omb_ingest_trigger_batch_sealed: not every event was appended';
    END IF;
    PERFORM omb_count_kept_events(v_installations, v_triggers, v_days);
    RETURN QUERY
      SELECT k.ord, 'accepted'::text, k.installation_id, 'trigger.event'::text
        FROM unnest(v_ords, v_installations) AS k(ord, installation_id);
  END IF;

  -- Nothing is left when every message was answered above (nearly every batch): the query
  -- below is then not run at all (Postgres planned it again for most batches, 0.1 ms each).
  IF coalesce(cardinality(v_ords), 0) + coalesce(cardinality(v_refused_ords), 0) = jsonb_array_length(p_messages) THEN
    RETURN;
  END IF;

  FOR m IN
    SELECT e.ordinality::integer AS ord, e.value AS v
      FROM jsonb_array_elements(p_messages) WITH ORDINALITY AS e
      LEFT JOIN LATERAL (SELECT t.installation_id FROM triggers t
                          WHERE t.composio_trigger_id = e.value->>'triggerId' LIMIT 1) tr ON true
     WHERE NOT (e.ordinality::integer = ANY (coalesce(v_ords, '{}') || coalesce(v_refused_ords, '{}')))
     ORDER BY tr.installation_id NULLS FIRST, e.ordinality
  LOOP
    SELECT * INTO r FROM omb_ingest_trigger_alone_sealed(
      m.v->>'eventId',
      m.v->>'triggerId',
      m.v->>'userId',
      m.v->'payload'->'data',
      decode(m.v->>'sealed', 'base64'),
      (m.v->>'receivedAt')::timestamptz,
      (m.v->>'day')::date,
      m.v->>'resetsAt',
      m.v->>'quotaEventId',
      (m.v->>'quotaStandard')::integer,
      (m.v->>'quotaPaid')::integer);
    ordinal := m.ord;
    outcome := r.outcome;
    installation := r.installation;
    queued := r.queued;
    RETURN NEXT;
  END LOOP;
END;
$$;
