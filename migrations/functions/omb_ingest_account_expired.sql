-- The previous release's entry for an expired account, kept for its processes during a rolling
-- deploy (this release calls omb_ingest_account_expiry). It took the event's `user_id` as the
-- owner; now it answers exactly as omb_ingest_account_expiry does, which routes by the account id
-- the broker stored and ignores `p_user_id`, so an old process cannot queue an expiry to an
-- installation that does not own the account either. Removed, by a migration, a release later.
CREATE OR REPLACE FUNCTION omb_ingest_account_expired(
  p_event_id text,
  p_connected_account_id text,
  p_user_id text,
  p_toolkit text,
  p_received_at timestamptz,
  OUT outcome text,
  OUT installation uuid,
  OUT queued text
) LANGUAGE sql AS $$
  SELECT e.outcome, e.installation, e.queued
    FROM omb_ingest_account_expiry(p_event_id, p_connected_account_id, p_toolkit, p_received_at) e;
$$;
