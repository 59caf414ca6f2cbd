-- Dedupe: which of the given (installation, id, received_at) the installation already holds, as
-- an event with this id received in the 72 hours before received_at; for a whole batch at once,
-- or for one event as a batch of one. Composio redelivers a webhook it got no 2xx for, under the
-- same `webhook-id`, for about a day (the Standard Webhooks schedule: 5 s, 5 min, 30 min, 2 h,
-- 5 h, 10 h, 10 h); 72 hours covers that with room for a delivery retried by hand from the
-- dashboard, and keeps the probe to at most four day partitions, each through the
-- (installation_id, id) index of that day alone. There is no index over all ids: every key starts
-- with the installation, as a later step to a Postgres distributed on installation_id needs.
--
-- One index probe per event and day partition, without a function call per event: LATERAL …
-- LIMIT 1 keeps it a probe whatever the plan's estimates (as a join it could become a scan of
-- whole partitions once they hold many events).
--
-- Ids the broker makes for its own events start with `omb:`, which a `webhook-id` may not
-- (src/intake/receive.ts), so a webhook can never be taken for one of them.
CREATE OR REPLACE FUNCTION omb_events_seen(p_installation uuid[], p_id text[], p_received_at timestamptz[])
RETURNS TABLE (installation_id uuid, id text) LANGUAGE sql STABLE AS $$
  SELECT g.installation_id, g.id
    FROM unnest(p_installation, p_id, p_received_at) AS g(installation_id, id, received_at)
   CROSS JOIN LATERAL (SELECT 1 FROM events e
                        WHERE e.installation_id = g.installation_id AND e.id = g.id
                          AND e.received_at >= g.received_at - interval '72 hours'
                        LIMIT 1) seen
$$;
