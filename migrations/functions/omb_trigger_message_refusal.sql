-- Why a trigger message that reached its trigger is not kept, or null when it is: the one
-- predicate both ingest paths ask (omb_ingest_trigger_batch for a whole batch at once,
-- omb_ingest_trigger_alone one message at a time). Checked in this order, before dedupe and the
-- quota, so a refused message never costs quota and is refused the same way when redelivered:
-- `user_mismatch` (the webhook's Composio user is not the installation's), `paused` (the trigger
-- is disabled), `filtered` (the trigger's filter leaves it out, omb_trigger_filter_matches).
CREATE OR REPLACE FUNCTION omb_trigger_message_refusal(
  p_installation_user text,
  p_message_user text,
  p_enabled boolean,
  p_toolkit text,
  p_filter jsonb,
  p_data jsonb
) RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE
           WHEN p_installation_user IS DISTINCT FROM p_message_user THEN 'user_mismatch'
           WHEN NOT p_enabled THEN 'paused'
           WHEN NOT omb_trigger_filter_matches(p_toolkit, p_filter, p_data) THEN 'filtered'
         END
$$;
