-- A connected account expired: its triggers need a reconnect, and the installation that owns the
-- account hears it once through a `connection.expired` event, whose shape is built here.
--
-- The owner is decided by the account id alone, as the broker stored it: the installation whose
-- triggers are on that account (creating a trigger proved the account the installation's with
-- Composio). The event's `user_id` decides nothing: Composio deprecates it, its documented expiry
-- has none, and a signed event naming one installation's user and another's account must not
-- reach the first. An account no installation's trigger is on (or, which creation never allows,
-- more than one installation's) is `unknown_account`: answered, counted, nothing queued.
--
-- Positions are allocated under the installation's row lock, and dedupe is by the installation's
-- own ids, checked once under that lock, as in omb_ingest_trigger_alone. Marking the account's
-- triggers is this function's part in the triggers table, whose other writes are all
-- src/triggers/store.ts's.
CREATE OR REPLACE FUNCTION omb_ingest_account_expiry(
  p_event_id text,
  p_connected_account_id text,
  p_toolkit text,
  p_received_at timestamptz,
  OUT outcome text,
  OUT installation uuid,
  -- the type of the event queued, null when none was
  OUT queued text
) LANGUAGE plpgsql AS $$
DECLARE
  v_owners uuid[];
  v_triggers jsonb;
  v_toolkit text;
BEGIN
  SELECT array_agg(DISTINCT tr.installation_id) INTO v_owners
    FROM triggers tr WHERE tr.connected_account_id = p_connected_account_id;
  IF coalesce(cardinality(v_owners), 0) <> 1 THEN
    outcome := 'unknown_account';
    RETURN;
  END IF;
  installation := v_owners[1];
  PERFORM 1 FROM installations i WHERE i.id = installation FOR NO KEY UPDATE;
  -- Removed in the meantime (its triggers went with it).
  IF NOT FOUND THEN
    installation := NULL;
    outcome := 'unknown_account';
    RETURN;
  END IF;
  IF EXISTS (SELECT 1 FROM omb_events_seen(ARRAY[installation], ARRAY[p_event_id], ARRAY[p_received_at])) THEN
    outcome := 'duplicate';
    RETURN;
  END IF;

  WITH marked AS (
    UPDATE triggers tr SET needs_reconnect_at = coalesce(tr.needs_reconnect_at, p_received_at)
     WHERE tr.installation_id = installation AND tr.connected_account_id = p_connected_account_id
     RETURNING tr.id, tr.automation_id, tr.trigger_slug, tr.toolkit
  )
  SELECT coalesce(jsonb_agg(jsonb_build_object('triggerId', m.id, 'automationId', m.automation_id,
                                               'triggerSlug', m.trigger_slug) ORDER BY m.automation_id), '[]'::jsonb),
         min(m.toolkit)
    INTO v_triggers, v_toolkit
    FROM marked m;

  -- The event keeps its webhook's id (the contract: the webhook-id is the event id).
  PERFORM omb_append_event(installation, p_event_id, 'connection.expired', NULL, NULL, coalesce(p_toolkit, v_toolkit),
                           NULL, p_connected_account_id, p_received_at,
                           jsonb_build_object('connectedAccountId', p_connected_account_id,
                                              'toolkit', coalesce(p_toolkit, v_toolkit), 'triggers', v_triggers));
  outcome := 'accepted';
  queued := 'connection.expired';
END;
$$;
