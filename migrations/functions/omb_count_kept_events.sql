-- Counts kept trigger events into the day's figures: per installation (daily_usage.kept, which
-- the quota reads) and per trigger (trigger_daily_usage.kept). One row per kept event in the
-- arrays; both ingest paths count through this, one event or a whole batch's at once.
-- The counters belong to plans/usage (src/plans/usage.ts); this is its part in the database.
CREATE OR REPLACE FUNCTION omb_count_kept_events(p_installations uuid[], p_triggers uuid[], p_days date[])
RETURNS void LANGUAGE sql AS $$
  INSERT INTO daily_usage AS u (installation_id, day, kept)
    SELECT k.installation_id, k.day, count(*) FROM unnest(p_installations, p_days) AS k(installation_id, day)
     GROUP BY k.installation_id, k.day
    ON CONFLICT (installation_id, day) DO UPDATE SET kept = u.kept + excluded.kept;
  INSERT INTO trigger_daily_usage AS d (trigger_id, day, kept)
    SELECT k.trigger_id, k.day, count(*) FROM unnest(p_triggers, p_days) AS k(trigger_id, day)
     GROUP BY k.trigger_id, k.day
    ON CONFLICT (trigger_id, day) DO UPDATE SET kept = d.kept + excluded.kept;
$$;
