-- Whether a trigger message passes its trigger's filter: the one place this is decided, asked by
-- both ingest paths (omb_trigger_message_refusal).
--
-- Gmail filters became the trigger's Gmail search query when it was created
-- (src/triggers/gmail-query.ts), so Gmail itself leaves other mail out and nothing is checked
-- on arrival. For other apps each filter key is a dot path into the event's data
-- (`sender.login`, `items.0.name`), and the value found there must contain the filter's text,
-- ignoring case (as the database's collation folds case: Unicode under a UTF-8 locale). Every
-- key must match; an empty filter matches everything. Text, numbers and booleans compare as
-- text; a list matches when any of its items does (lists within lists too); a missing path, null
-- or a whole object matches nothing. A list is indexed by position only, written as a plain
-- number (`0`, `12`).
CREATE OR REPLACE FUNCTION omb_trigger_filter_matches(p_toolkit text, p_filter jsonb, p_data jsonb)
RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  f record;
  v_segment text;
  v_value jsonb;
  v_wanted text;
  v_pending jsonb;
  v_found boolean;
BEGIN
  IF lower(p_toolkit) = 'gmail' OR p_filter IS NULL OR p_filter = '{}'::jsonb THEN
    RETURN true;
  END IF;
  FOR f IN SELECT e.key, e.value FROM jsonb_each_text(p_filter) AS e LOOP
    v_value := p_data;
    FOREACH v_segment IN ARRAY regexp_split_to_array(f.key, '\.') LOOP
      v_value := CASE jsonb_typeof(v_value)
                   WHEN 'object' THEN v_value -> v_segment
                   WHEN 'array' THEN CASE WHEN v_segment ~ '^(0|[1-9][0-9]{0,8})$' THEN v_value -> v_segment::integer END
                 END;
      EXIT WHEN v_value IS NULL;
    END LOOP;
    IF v_value IS NULL THEN
      RETURN false;
    END IF;

    -- The value, or any item of it where it is a list, must hold the text.
    v_wanted := lower(f.value);
    v_pending := jsonb_build_array(v_value);
    v_found := false;
    WHILE NOT v_found AND jsonb_array_length(v_pending) > 0 LOOP
      v_value := v_pending -> 0;
      v_pending := v_pending - 0;
      CASE jsonb_typeof(v_value)
        WHEN 'array' THEN v_pending := v_value || v_pending;
        WHEN 'string', 'number', 'boolean' THEN v_found := position(v_wanted IN lower(v_value #>> '{}')) > 0;
        ELSE NULL;
      END CASE;
    END LOOP;
    IF NOT v_found THEN
      RETURN false;
    END IF;
  END LOOP;
  RETURN true;
END;
$$;
