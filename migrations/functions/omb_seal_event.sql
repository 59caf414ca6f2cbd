-- The events table's insert trigger: in a transaction omb_stash_sealed marked as sealing, a
-- `trigger.event` row whose Composio user and event id have sealed data set aside is stored with
-- that instead of its clear data (`sealed` set, `data` null). Every other row goes in as given: the
-- broker's own events, and every insert of a process that does not seal (the previous release's,
-- or this release's while one of those is connected, src/events/sealing.ts). The row's
-- installation names its Composio user, which the sealed data is bound to; a message for another
-- user never reaches an insert (omb_trigger_message_refusal).
CREATE OR REPLACE FUNCTION omb_seal_event() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  v_sealed bytea;
BEGIN
  IF NEW.type <> 'trigger.event' OR current_setting('omb.sealing', true) IS DISTINCT FROM 'on' THEN
    RETURN NEW;
  END IF;
  SELECT s.sealed INTO v_sealed
    FROM pg_temp.omb_sealed_stash s
    JOIN installations i ON i.composio_user_id = s.user_id
   WHERE i.id = NEW.installation_id AND s.event_id = NEW.id;
  IF FOUND THEN
    NEW.sealed := v_sealed;
    NEW.data := NULL;
  END IF;
  RETURN NEW;
END;
$$;
-- The trigger itself, defined with its function (CREATE OR REPLACE: applied again with every change of this file).
CREATE OR REPLACE TRIGGER omb_events_seal BEFORE INSERT ON events FOR EACH ROW EXECUTE FUNCTION omb_seal_event();
