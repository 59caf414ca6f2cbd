-- One read of an installation's queue (src/queue/queue.ts readQueue): where the queue stands
-- (`after`: p_after, or the acknowledged position when null; `last`: its last position) and up to
-- p_limit events after `after`, in position order, none received before the retention horizon
-- (event_retention.kept_since) nor, with p_recent_only, before yesterday 00:00 UTC. One row with
-- null event columns when there are none; no row when the installation does not exist.
--
-- The lower bound on received_at is one value, so only the day partitions it leaves are read.
-- The read is planned once per connection (a generic plan, pruned as it runs): once the day
-- partitions hold millions of events and their statistics are full, planning this read costs ten
-- times executing it (0.42 ms against 0.04 ms at 8M events), and Postgres would otherwise choose
-- to plan it again for every poll.
CREATE OR REPLACE FUNCTION omb_read_queue(p_installation uuid, p_after bigint, p_limit integer, p_recent_only boolean)
RETURNS TABLE (
  after bigint,
  last bigint,
  "position" bigint,
  id text,
  type text,
  trigger_id uuid,
  automation_id text,
  toolkit text,
  trigger_slug text,
  connected_account_id text,
  received_at timestamptz,
  data jsonb
) LANGUAGE sql STABLE SET plan_cache_mode = force_generic_plan AS $$
  WITH start AS (
    SELECT coalesce(p_after, i.acked_event_position) AS after, i.last_event_position AS last,
           greatest(coalesce((SELECT r.kept_since FROM event_retention r), '-infinity'),
                    CASE WHEN p_recent_only
                         THEN (date_trunc('day', now() AT TIME ZONE 'UTC') - interval '1 day') AT TIME ZONE 'UTC'
                         ELSE '-infinity'::timestamptz END) AS read_since
      FROM installations i
     WHERE i.id = p_installation
  )
  SELECT s.after, s.last, e.position, e.id, e.type, e.trigger_id, e.automation_id, e.toolkit,
         e.trigger_slug, e.connected_account_id, e.received_at, e.data
    FROM start s
    LEFT JOIN LATERAL (
      SELECT * FROM events e
       WHERE e.installation_id = p_installation AND e.position > s.after AND e.received_at >= s.read_since
       ORDER BY e.position
       LIMIT p_limit
    ) e ON true
   ORDER BY e.position
$$;
