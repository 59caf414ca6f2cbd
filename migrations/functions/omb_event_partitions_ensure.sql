-- The day partitions of `events` (one per UTC day, `events_pYYYYMMDD`, holding what was received
-- from that midnight to the next), created ahead by the broker's maintenance job
-- (src/retention/retention.ts) under its advisory lock, and by the migration that partitioned the
-- table. Creates the missing ones for every day from p_from through p_through; answers how many
-- it created.
--
-- A partition is created standing alone, given the rows of its day that waited in the default
-- partition (events received for a day that had no partition yet), then attached: attaching
-- locks the parent only against other schema changes, so ingest and polls go on. A day that
-- overlaps an existing partition (the one the upgrade made of the old table) is left alone.
CREATE OR REPLACE FUNCTION omb_event_partitions_ensure(p_from date, p_through date)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
  v_day date;
  v_name text;
  v_created integer := 0;
BEGIN
  FOR v_day IN SELECT d::date FROM generate_series(p_from, p_through, interval '1 day') d LOOP
    v_name := 'events_p' || to_char(v_day, 'YYYYMMDD');
    CONTINUE WHEN to_regclass(quote_ident(v_name)) IS NOT NULL;
    CONTINUE WHEN EXISTS (
      SELECT 1 FROM pg_inherits h JOIN pg_class c ON c.oid = h.inhrelid
       WHERE h.inhparent = 'events'::regclass AND c.relname <> 'events_default'
         AND (SELECT r.lower < (v_day + 1)::timestamp AT TIME ZONE 'UTC' AND r.upper > v_day::timestamp AT TIME ZONE 'UTC'
                FROM omb_event_partition_bounds(c.oid) r));
    EXECUTE format('CREATE TABLE %I (LIKE events INCLUDING DEFAULTS)', v_name);
    EXECUTE format(
      'WITH moved AS (DELETE FROM events_default WHERE received_at >= %L AND received_at < %L RETURNING *) '
      'INSERT INTO %I SELECT * FROM moved',
      v_day::timestamp AT TIME ZONE 'UTC', (v_day + 1)::timestamp AT TIME ZONE 'UTC', v_name);
    EXECUTE format('ALTER TABLE events ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)',
      v_name, v_day::timestamp AT TIME ZONE 'UTC', (v_day + 1)::timestamp AT TIME ZONE 'UTC');
    v_created := v_created + 1;
  END LOOP;
  RETURN v_created;
END;
$$;
