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
