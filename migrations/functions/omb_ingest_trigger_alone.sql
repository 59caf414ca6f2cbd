-- The previous release's (0.1.0's) way one trigger message enters its queue alone, its data in
-- clear: since 0.2.0 omb_ingest_trigger_alone_sealed with no sealed data, the one body of those
-- rules (the order they are checked in, dedupe, the quota). Called by 0.1.0's batch function;
-- 0.2.0's calls omb_ingest_trigger_alone_sealed itself.
CREATE OR REPLACE FUNCTION omb_ingest_trigger_alone(
  p_event_id text,
  p_composio_trigger_id text,
  p_user_id text,
  p_data jsonb,
  p_received_at timestamptz,
  p_day date,
  p_resets_at text,
  p_quota_event_id text,
  p_quota_standard integer,
  p_quota_paid integer,
  OUT outcome text,
  OUT installation uuid,
  OUT queued text
) LANGUAGE plpgsql AS $$
BEGIN
  SELECT a.outcome, a.installation, a.queued INTO outcome, installation, queued
    FROM omb_ingest_trigger_alone_sealed(p_event_id, p_composio_trigger_id, p_user_id, p_data, NULL, p_received_at, p_day,
                                         p_resets_at, p_quota_event_id, p_quota_standard, p_quota_paid) a;
END;
$$;
