-- The one way events enter installations' queues: each installation's next positions, then the
-- rows, for as many events as are given, in the order given (arrays of one length, one element
-- per event). Each installation's positions are taken in one UPDATE and every row is written in
-- one INSERT, so a batch of webhooks costs two statements, not two per event.
--
-- An event is stored with its data in clear (`p_data`) or encrypted (`p_sealed`, src/data-keys/seal.ts,
-- sealed by the broker for this installation's Composio user and this event's id): a row given
-- sealed data stores no clear data, whatever `p_data` holds. `p_sealed` may be null (every event
-- in clear), as it is from omb_append_events, the previous release's way in.
--
-- The caller holds the row lock of every installation concerned (taken before its dedupe
-- checks), so positions are allocated and committed in order and stay contiguous per
-- installation: a position missing between a cursor and the first event still kept can only
-- have been removed by retention, which is how a poll knows to say `gap` (src/events/queue/queue.ts).
--
-- The rows land in the partitions of their `received_at` days (or in the default partition when
-- a day has none yet; src/events/retention/retention.ts creates them ahead). Answers each event's
-- position, by its 1-based index in the arrays.
CREATE OR REPLACE FUNCTION omb_append_events_sealed(
  p_installation uuid[],
  p_id text[],
  p_type text[],
  p_trigger_id uuid[],
  p_automation_id text[],
  p_toolkit text[],
  p_trigger_slug text[],
  p_connected_account_id text[],
  p_received_at timestamptz[],
  p_data jsonb[],
  p_sealed bytea[]
) RETURNS TABLE (ord integer, event_position bigint) LANGUAGE sql AS $$
  WITH given AS (
    SELECT g.*, row_number() OVER (PARTITION BY g.installation_id ORDER BY g.ord) AS nth
      FROM unnest(p_installation, p_id, p_type, p_trigger_id, p_automation_id, p_toolkit, p_trigger_slug,
                  p_connected_account_id, p_received_at, p_data, p_sealed) WITH ORDINALITY
           AS g(installation_id, id, type, trigger_id, automation_id, toolkit, trigger_slug, connected_account_id,
                received_at, data, sealed, ord)
  ), bumped AS (
    UPDATE installations i SET last_event_position = i.last_event_position + c.n
      FROM (SELECT installation_id, count(*) AS n FROM given GROUP BY installation_id) c
     WHERE i.id = c.installation_id
    RETURNING i.id, i.last_event_position - c.n AS base
  ), placed AS (
    SELECT g.*, b.base + g.nth AS position FROM given g JOIN bumped b ON b.id = g.installation_id
  ), inserted AS (
    INSERT INTO events (installation_id, position, id, type, trigger_id, automation_id, toolkit, trigger_slug,
                        connected_account_id, received_at, data, sealed)
    SELECT p.installation_id, p.position, p.id, p.type, p.trigger_id, p.automation_id, p.toolkit, p.trigger_slug,
           p.connected_account_id, p.received_at, CASE WHEN p.sealed IS NULL THEN p.data END, p.sealed
      FROM placed p
  )
  SELECT p.ord::integer, p.position FROM placed p ORDER BY p.ord
$$;
