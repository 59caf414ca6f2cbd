-- The previous release's (0.1.0's) batch ingest, its data in clear: since 0.2.0
-- omb_ingest_trigger_batch_sealed given the same messages (0.1.0's never have `sealed`), the one
-- body of those rules. 0.2.0's brokers call omb_ingest_trigger_batch_sealed itself.
-- One row comes back per message, `ordinal` being its 1-based index.
CREATE OR REPLACE FUNCTION omb_ingest_trigger_batch(p_messages jsonb)
RETURNS TABLE (
  ordinal integer,
  outcome text,
  installation uuid,
  queued text
) LANGUAGE plpgsql AS $$
BEGIN
  RETURN QUERY SELECT b.ordinal, b.outcome, b.installation, b.queued FROM omb_ingest_trigger_batch_sealed(p_messages) b;
END;
$$;
