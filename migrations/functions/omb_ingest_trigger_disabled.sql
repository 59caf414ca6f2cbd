-- Composio stopped a trigger by itself (`composio.trigger.disabled`): the trigger shows it, and
-- the installation that owns it hears it once through a `trigger.disabled` event, outside the
-- quota, whose shape is built here.
--
-- The owner is decided by the Composio trigger id alone, as the broker stored it: the event's
-- `user_id`, if any, decides nothing (as in omb_ingest_account_expiry). A trigger id no row holds
-- is `unknown_trigger`: answered, counted, nothing queued.
--
-- `connection_expired` is an expiry seen from the trigger's side: the trigger needs a reconnect
-- (`needs_reconnect`, brought back by the reconnect job as after `connected_account.expired`).
-- Any other reason marks the trigger stopped by Composio, with the reason, until it runs again.
-- A trigger already shown stopped (for an expiry: already `needs_reconnect`, which the
-- `connection.expired` event announced with the trigger in it) is `already_known`: answered,
-- counted, nothing queued, so one cause reaches the installation once.
-- The reconciliation (src/triggers/reconcile.ts) calls this too, with an id of its own, when it
-- finds a trigger Composio disabled without the broker having heard of it.
--
-- Positions are allocated under the installation's row lock, and dedupe is by the installation's
-- own ids, checked once under that lock, as in omb_ingest_trigger_alone. Marking the trigger is
-- this function's part in the triggers table, whose other writes are all src/triggers/store.ts's.
CREATE OR REPLACE FUNCTION omb_ingest_trigger_disabled(
  p_event_id text,
  p_composio_trigger_id text,
  p_reason text,
  p_received_at timestamptz,
  OUT outcome text,
  OUT installation uuid,
  -- the type of the event queued, null when none was
  OUT queued text
) LANGUAGE plpgsql AS $$
DECLARE
  v_trigger triggers%ROWTYPE;
  v_reconnect boolean := p_reason = 'connection_expired';
BEGIN
  SELECT tr.installation_id INTO installation FROM triggers tr WHERE tr.composio_trigger_id = p_composio_trigger_id;
  IF NOT FOUND THEN
    outcome := 'unknown_trigger';
    RETURN;
  END IF;
  PERFORM 1 FROM installations i WHERE i.id = installation FOR NO KEY UPDATE;
  IF NOT FOUND THEN
    installation := NULL;
    outcome := 'unknown_trigger';
    RETURN;
  END IF;
  IF EXISTS (SELECT 1 FROM omb_events_seen(ARRAY[installation], ARRAY[p_event_id], ARRAY[p_received_at])) THEN
    outcome := 'duplicate';
    RETURN;
  END IF;

  -- Read again under the lock, scoped by the installation: the row may have moved or gone meanwhile.
  SELECT * INTO v_trigger FROM triggers tr
   WHERE tr.installation_id = installation AND tr.composio_trigger_id = p_composio_trigger_id;
  IF NOT FOUND THEN
    installation := NULL;
    outcome := 'unknown_trigger';
    RETURN;
  END IF;
  IF v_trigger.needs_reconnect_at IS NOT NULL OR (NOT v_reconnect AND v_trigger.composio_disabled_at IS NOT NULL) THEN
    outcome := 'already_known';
    RETURN;
  END IF;

  UPDATE triggers tr
     SET needs_reconnect_at = CASE WHEN v_reconnect THEN coalesce(tr.needs_reconnect_at, p_received_at) ELSE tr.needs_reconnect_at END,
         composio_disabled_at = CASE WHEN v_reconnect THEN tr.composio_disabled_at ELSE coalesce(tr.composio_disabled_at, p_received_at) END,
         composio_disabled_reason = CASE WHEN v_reconnect THEN tr.composio_disabled_reason ELSE p_reason END
   WHERE tr.id = v_trigger.id
   RETURNING * INTO v_trigger;

  -- The event keeps its webhook's id (the contract: the webhook-id is the event id).
  PERFORM omb_append_event(installation, p_event_id, 'trigger.disabled', v_trigger.id, v_trigger.automation_id,
                           v_trigger.toolkit, v_trigger.trigger_slug, v_trigger.connected_account_id, p_received_at,
                           jsonb_build_object('reason', p_reason,
                                              'status', CASE WHEN v_reconnect THEN 'needs_reconnect' ELSE 'disabled_by_composio' END));
  outcome := 'accepted';
  queued := 'trigger.disabled';
END;
$$;
