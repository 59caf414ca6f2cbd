-- Dedupe for a batch: the (installation, id) pairs of the given events that their installation
-- already holds, received in the 72 hours before each one's received_at. The rule and its window
-- are explained in omb_event_seen.sql, which asks the same question of one event through this.
-- One index probe per event and day partition, without a function call per event: LATERAL …
-- LIMIT 1 keeps it a probe whatever the plan's estimates (as a join it could become a scan of
-- whole partitions once they hold many events).
CREATE OR REPLACE FUNCTION omb_events_seen(p_installation uuid[], p_id text[], p_received_at timestamptz[])
RETURNS TABLE (installation_id uuid, id text) LANGUAGE sql STABLE AS $$
  SELECT g.installation_id, g.id
    FROM unnest(p_installation, p_id, p_received_at) AS g(installation_id, id, received_at)
   CROSS JOIN LATERAL (SELECT 1 FROM events e
                        WHERE e.installation_id = g.installation_id AND e.id = g.id
                          AND e.received_at >= g.received_at - interval '72 hours'
                        LIMIT 1) seen
$$;
