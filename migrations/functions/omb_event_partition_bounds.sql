-- The range of received_at one partition of `events` holds, from its partition bound:
-- [lower, upper), with -infinity for MINVALUE (the partition the upgrade made of the old table).
-- Null for the default partition.
CREATE OR REPLACE FUNCTION omb_event_partition_bounds(p_partition oid, OUT lower timestamptz, OUT upper timestamptz)
LANGUAGE plpgsql STABLE AS $$
DECLARE
  v_bound text := pg_get_expr((SELECT c.relpartbound FROM pg_class c WHERE c.oid = p_partition), p_partition);
  v_parts text[];
BEGIN
  v_parts := regexp_match(v_bound, '^FOR VALUES FROM \((.*)\) TO \((.*)\)$');
  IF v_parts IS NULL THEN
    RETURN;
  END IF;
  lower := CASE WHEN v_parts[1] = 'MINVALUE' THEN '-infinity'::timestamptz ELSE trim(both '''' FROM v_parts[1])::timestamptz END;
  upper := CASE WHEN v_parts[2] = 'MAXVALUE' THEN 'infinity'::timestamptz ELSE trim(both '''' FROM v_parts[2])::timestamptz END;
END;
$$;
