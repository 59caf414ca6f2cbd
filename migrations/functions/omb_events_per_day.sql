-- How many events a day an installation may keep at `p_at`: the paid plan's quota while
-- omb_paid_plans lists it, the standard one otherwise. The one place a plan picks its quota: webhook
-- ingest counts against it (omb_ingest_trigger_alone) and `/v1/me` shows it (src/plans/plan.ts).
-- The two quotas are the broker's settings (`QUOTA_STANDARD`, `QUOTA_PAID`), passed in.
CREATE OR REPLACE FUNCTION omb_events_per_day(p_installation uuid, p_at timestamptz, p_standard integer, p_paid integer)
RETURNS integer
LANGUAGE sql STABLE AS $$
  SELECT CASE WHEN EXISTS (SELECT 1 FROM omb_paid_plans(p_at) p WHERE p.installation_id = p_installation)
              THEN p_paid ELSE p_standard END
$$;
