-- omb_trigger_message_refusal for a message whose clear data may not have been given: a broker
-- that seals a message's data sends its clear data only when the database must read it
-- (src/events/intake/ingest.ts), for there is no other use for it here. Without it (`p_data` null),
-- a trigger whose filter reads the data answers `needs_data`, after `user_mismatch` and `paused`
-- and before anything is stored or counted, and the broker sends the message again with its data
-- (src/events/intake/ingest-batcher.ts). A filter reads the data unless it passes no data at all
-- (Gmail's filters, an empty one: omb_trigger_filter_matches).
CREATE OR REPLACE FUNCTION omb_trigger_message_refusal_sealed(
  p_installation_user text,
  p_message_user text,
  p_enabled boolean,
  p_toolkit text,
  p_filter jsonb,
  p_data jsonb
) RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE
           WHEN p_data IS NULL AND p_filter IS NOT NULL AND NOT omb_trigger_filter_matches(p_toolkit, p_filter, NULL)
             THEN coalesce(omb_trigger_message_refusal(p_installation_user, p_message_user, p_enabled, p_toolkit, NULL, NULL),
                           'needs_data')
           ELSE omb_trigger_message_refusal(p_installation_user, p_message_user, p_enabled, p_toolkit, p_filter, p_data)
         END
$$;
