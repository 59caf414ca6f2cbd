-- Dedupe: which of the given (installation, id, received_at) the installation already holds, as
-- an event with this id received in the 72 hours before received_at (omb_events_seen, for a
-- whole batch at once), or whether one does (omb_event_seen). Composio redelivers a webhook it got no 2xx for, under the same
-- `webhook-id`, for about a day (the Standard Webhooks schedule: 5 s, 5 min, 30 min, 2 h, 5 h,
-- 10 h, 10 h); 72 hours covers that with room for a delivery retried by hand from the dashboard,
-- and keeps the probe to at most four day partitions, each through the (installation_id, id)
-- index of that day alone. There is no index over all ids: every key starts with the
-- installation, as a later step to a Postgres distributed on installation_id needs.
--
-- Ids the broker makes for its own events start with `omb:`, which the webhook route refuses in
-- a `webhook-id` (src/intake/webhook-routes.ts), so a webhook can never be taken for one of them.
CREATE OR REPLACE FUNCTION omb_event_seen(p_installation uuid, p_id text, p_received_at timestamptz)
RETURNS boolean LANGUAGE sql STABLE AS $$
  SELECT EXISTS (SELECT 1 FROM omb_events_seen(ARRAY[p_installation], ARRAY[p_id], ARRAY[p_received_at]))
$$;
