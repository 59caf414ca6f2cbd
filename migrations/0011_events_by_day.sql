-- Events partitioned by UTC day on received_at, so retention drops whole days (constant time, no
-- dead tuples, no per-row WAL); dedupe scoped by installation (no index over all ids); gaps told
-- from contiguous positions instead of the event_expiry table; and the read horizon kept in one
-- row (event_retention) written by the retention job.
--
-- The upgrade keeps every existing event where it is: the old table becomes one partition
-- holding everything received before tomorrow (MINVALUE to tomorrow, UTC), and new days get
-- partitions of their own. Attaching it builds its two indexes ((installation_id, position,
-- received_at) and (installation_id, id)) and checks its rows once, under this migration's
-- locks: the broker does not serve while it runs (README, "Upgrading to day partitions", has the
-- measured time). Positions, acknowledged positions and so every cursor are unchanged. Retention
-- drops that partition whole once all of it is past the horizon; until then, polls skip what it
-- holds past the horizon.
--
-- The current body of every function is kept in migrations/functions/<name>.sql; the statements
-- below are copies of those files as of this migration (test/events/sql-functions.test.ts).
ALTER TABLE "events" RENAME TO "events_before_days";
--> statement-breakpoint
ALTER TABLE "events_before_days" DROP CONSTRAINT "events_installation_id_position_pk";
--> statement-breakpoint
DROP INDEX "events_id_idx";
--> statement-breakpoint
DROP INDEX "events_received_at_idx";
--> statement-breakpoint
ALTER TABLE "events_before_days" RENAME CONSTRAINT "events_installation_id_installations_id_fk" TO "events_before_days_installation_id_fk";
--> statement-breakpoint
CREATE TABLE "events" (
	"installation_id" uuid NOT NULL,
	"position" bigint NOT NULL,
	"id" text NOT NULL,
	"type" text NOT NULL,
	"trigger_id" uuid,
	"automation_id" text,
	"toolkit" text,
	"trigger_slug" text,
	"connected_account_id" text,
	"received_at" timestamp with time zone DEFAULT now() NOT NULL,
	"data" jsonb NOT NULL,
	CONSTRAINT "events_installation_id_position_received_at_pk" PRIMARY KEY("installation_id","position","received_at")
) PARTITION BY RANGE ("received_at");
--> statement-breakpoint
ALTER TABLE "events" ADD CONSTRAINT "events_installation_id_installations_id_fk" FOREIGN KEY ("installation_id") REFERENCES "public"."installations"("id") ON DELETE cascade ON UPDATE no action;
--> statement-breakpoint
CREATE INDEX "events_installation_id_id_idx" ON "events" USING btree ("installation_id","id");
--> statement-breakpoint
-- Events received for a day that has no partition yet; normally empty (partitions are created
-- days ahead). Retention removes its expired rows one by one, through this index.
CREATE TABLE "events_default" PARTITION OF "events" DEFAULT;
--> statement-breakpoint
CREATE INDEX "events_default_received_at_idx" ON "events_default" USING btree ("received_at");
--> statement-breakpoint
CREATE TABLE "event_retention" (
	"singleton" boolean PRIMARY KEY DEFAULT true NOT NULL,
	"kept_since" timestamp with time zone NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
DROP TABLE "event_expiry";
--> statement-breakpoint
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
--> statement-breakpoint
-- The day partitions of `events` (one per UTC day, `events_pYYYYMMDD`, holding what was received
-- from that midnight to the next), created ahead by the broker's maintenance job
-- (src/events/retention.ts) under its advisory lock, and by the migration that partitioned the
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
--> statement-breakpoint
-- Dedupe: whether the installation already holds an event with this id received in the 72 hours
-- before p_received_at. Composio redelivers a webhook it got no 2xx for, under the same
-- `webhook-id`, for about a day (the Standard Webhooks schedule: 5 s, 5 min, 30 min, 2 h, 5 h,
-- 10 h, 10 h); 72 hours covers that with room for a delivery retried by hand from the dashboard,
-- and keeps the probe to at most four day partitions, each through the (installation_id, id)
-- index of that day alone. There is no index over all ids: every key starts with the
-- installation, as a later step to a Postgres distributed on installation_id needs.
--
-- Ids the broker makes for its own events start with `omb:`, which the webhook route refuses in
-- a `webhook-id` (src/events/webhook-routes.ts), so a webhook can never be taken for one of them.
CREATE OR REPLACE FUNCTION omb_event_seen(p_installation uuid, p_id text, p_received_at timestamptz)
RETURNS boolean LANGUAGE sql STABLE AS $$
  SELECT EXISTS (
    SELECT 1 FROM events e
     WHERE e.installation_id = p_installation AND e.id = p_id
       AND e.received_at >= p_received_at - interval '72 hours')
$$;
--> statement-breakpoint
-- The one way an event enters an installation's queue: the next position, then the row. The
-- caller holds the installation's row lock (taken before its dedupe check), so positions are
-- allocated and committed in order and stay contiguous per installation: a position missing
-- between a cursor and the first event still kept can only have been removed by retention,
-- which is how a poll knows to say `gap` (src/events/queue.ts).
--
-- The row lands in the partition of its `received_at` day (or in the default partition when
-- that day has none yet; src/events/retention.ts creates them ahead).
CREATE OR REPLACE FUNCTION omb_append_event(
  p_installation uuid,
  p_id text,
  p_type text,
  p_trigger_id uuid,
  p_automation_id text,
  p_toolkit text,
  p_trigger_slug text,
  p_connected_account_id text,
  p_received_at timestamptz,
  p_data jsonb
) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  v_position bigint;
BEGIN
  UPDATE installations i SET last_event_position = i.last_event_position + 1
   WHERE i.id = p_installation RETURNING i.last_event_position INTO v_position;
  INSERT INTO events (installation_id, position, id, type, trigger_id, automation_id, toolkit, trigger_slug,
                      connected_account_id, received_at, data)
    VALUES (p_installation, v_position, p_id, p_type, p_trigger_id, p_automation_id, p_toolkit, p_trigger_slug,
            p_connected_account_id, p_received_at, p_data);
  RETURN v_position;
END;
$$;
--> statement-breakpoint
-- One trigger message into its installation's queue, in ONE round trip (src/events/ingest.ts,
-- usually through omb_ingest_trigger_messages).
--
-- Ordering: every path that appends an event first locks the installation's row and allocates the
-- position with `last_event_position + 1`. The lock is held until commit, so a later position can
-- only be allocated once the earlier one has committed: positions become visible in order per
-- installation, and a poller that has read position N never later misses a smaller one. Other
-- installations are not blocked.
--
-- Dedupe by event id within the installation (omb_event_seen) comes before the quota, so a
-- redelivery never consumes quota. It is checked once, under the installation's lock, so a
-- concurrent redelivery of the same event waits and then sees it: the lock, not an index, is
-- what makes it exactly once. (Not before the lock too: for a new event, which nearly every
-- webhook is, that would probe the dedupe index of every day in the window twice.)
--
-- Events enter the queue through omb_append_event alone.
--
-- The shapes of the events queued here are built here: `trigger.event` carries Composio's data
-- as it came, `quota.exceeded` the day, the limit and when it resets.
--
-- No NOTIFY here: pg_notify serialises commits database-wide. Ingest notifies after commit,
-- coalesced per installation (src/events/notifier.ts).
CREATE OR REPLACE FUNCTION omb_ingest_trigger_message(
  p_event_id text,
  p_composio_trigger_id text,
  p_user_id text,
  p_data jsonb,
  p_received_at timestamptz,
  p_day date,
  -- true once the caller has applied the trigger's filter (see outcome `check_filter`)
  p_filter_checked boolean,
  -- kept events per day on each plan (QUOTA_STANDARD, QUOTA_PAID)
  p_quota_standard integer,
  p_quota_paid integer,
  OUT outcome text,
  OUT installation uuid,
  OUT trigger_toolkit text,
  OUT trigger_filter jsonb,
  -- the type of the event this message queued, null when it queued none
  OUT queued text
) LANGUAGE plpgsql AS $$
DECLARE
  t record;
  v_kept integer;
  v_notified boolean;
  v_limit integer;
BEGIN
  SELECT tr.id, tr.installation_id, tr.automation_id, tr.toolkit, tr.trigger_slug, tr.connected_account_id,
         tr.filter, tr.enabled, i.composio_user_id
    INTO t
    FROM triggers tr JOIN installations i ON i.id = tr.installation_id
   WHERE tr.composio_trigger_id = p_composio_trigger_id;
  IF NOT FOUND THEN
    outcome := 'unknown_trigger';
    RETURN;
  END IF;
  installation := t.installation_id;
  trigger_toolkit := t.toolkit;
  IF t.composio_user_id <> p_user_id THEN
    outcome := 'user_mismatch';
    RETURN;
  END IF;
  IF NOT t.enabled THEN
    outcome := 'paused';
    RETURN;
  END IF;
  -- The filter is applied by the caller (src/triggers/filter.ts); an empty one matches everything.
  IF NOT p_filter_checked AND t.filter <> '{}'::jsonb THEN
    outcome := 'check_filter';
    trigger_filter := t.filter;
    RETURN;
  END IF;

  PERFORM 1 FROM installations i WHERE i.id = t.installation_id FOR NO KEY UPDATE;
  IF omb_event_seen(t.installation_id, p_event_id, p_received_at) THEN
    outcome := 'duplicate';
    RETURN;
  END IF;

  -- Under the installation lock nobody else counts this installation's day: read, decide, count.
  SELECT u.kept, u.exceeded_notified INTO v_kept, v_notified
    FROM daily_usage u WHERE u.installation_id = t.installation_id AND u.day = p_day;
  IF NOT FOUND THEN
    INSERT INTO daily_usage (installation_id, day) VALUES (t.installation_id, p_day) ON CONFLICT DO NOTHING;
    v_kept := 0;
    v_notified := false;
  END IF;

  -- Below the smaller limit the plan cannot matter, so it is looked up only near a limit.
  v_limit := NULL;
  IF v_kept >= least(p_quota_standard, p_quota_paid) THEN
    v_limit := CASE WHEN EXISTS (SELECT 1 FROM omb_paid_plans(p_received_at) p WHERE p.installation_id = t.installation_id)
                    THEN p_quota_paid ELSE p_quota_standard END;
  END IF;

  IF v_limit IS NOT NULL AND v_kept >= v_limit THEN
    UPDATE daily_usage u SET skipped = u.skipped + 1, exceeded_notified = true
     WHERE u.installation_id = t.installation_id AND u.day = p_day;
    INSERT INTO trigger_daily_usage AS d (trigger_id, day, skipped, skipped_reason)
      VALUES (t.id, p_day, 1, 'daily_limit')
      ON CONFLICT (trigger_id, day) DO UPDATE SET skipped = d.skipped + 1, skipped_reason = 'daily_limit';
    -- The first skip of the day tells the installation once; it is not a kept event.
    IF NOT v_notified THEN
      -- A broker-made id: `omb:` is refused in a webhook-id, so no webhook can share it.
      PERFORM omb_append_event(t.installation_id, 'omb:quota.exceeded:' || p_day, 'quota.exceeded', NULL, NULL, NULL,
                               NULL, NULL, p_received_at,
                               jsonb_build_object('day', p_day, 'eventsPerDay', v_limit,
                                                  'resetsAt', to_char((p_day + 1)::timestamp, 'YYYY-MM-DD') || 'T00:00:00.000Z'));
      queued := 'quota.exceeded';
    END IF;
    outcome := 'over_quota';
    RETURN;
  END IF;

  PERFORM omb_append_event(t.installation_id, p_event_id, 'trigger.event', t.id, t.automation_id, t.toolkit,
                           t.trigger_slug, t.connected_account_id, p_received_at, p_data);
  UPDATE daily_usage u SET kept = u.kept + 1 WHERE u.installation_id = t.installation_id AND u.day = p_day;
  INSERT INTO trigger_daily_usage AS d (trigger_id, day, kept) VALUES (t.id, p_day, 1)
    ON CONFLICT (trigger_id, day) DO UPDATE SET kept = d.kept + 1;
  outcome := 'accepted';
  queued := 'trigger.event';
END;
$$;
--> statement-breakpoint
-- A connected account expired: its triggers need a reconnect, and the installation hears it once
-- through a `connection.expired` event, whose shape is built here. Positions are allocated under
-- the installation's row lock and dedupe is by the installation's own ids, as in
-- omb_ingest_trigger_message.
CREATE OR REPLACE FUNCTION omb_ingest_account_expired(
  p_event_id text,
  p_connected_account_id text,
  p_user_id text,
  p_toolkit text,
  p_received_at timestamptz,
  OUT outcome text,
  OUT installation uuid,
  -- the type of the event queued, null when none was
  OUT queued text
) LANGUAGE plpgsql AS $$
DECLARE
  v_triggers jsonb;
  v_toolkit text;
BEGIN
  SELECT i.id INTO installation FROM installations i WHERE i.composio_user_id = p_user_id;
  IF NOT FOUND THEN
    outcome := 'unknown_account';
    RETURN;
  END IF;
  IF omb_event_seen(installation, p_event_id, p_received_at) THEN
    outcome := 'duplicate';
    RETURN;
  END IF;

  PERFORM 1 FROM installations i WHERE i.id = installation FOR NO KEY UPDATE;
  IF omb_event_seen(installation, p_event_id, p_received_at) THEN
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
--> statement-breakpoint
DO $$
DECLARE
  v_tomorrow date := (now() AT TIME ZONE 'UTC')::date + 1;
BEGIN
  IF EXISTS (SELECT 1 FROM events_before_days) THEN
    v_tomorrow := greatest(v_tomorrow, (SELECT (max(received_at) AT TIME ZONE 'UTC')::date + 1 FROM events_before_days));
    EXECUTE format('ALTER TABLE events ATTACH PARTITION events_before_days FOR VALUES FROM (MINVALUE) TO (%L)',
                   v_tomorrow::timestamp AT TIME ZONE 'UTC');
  ELSE
    DROP TABLE events_before_days;
  END IF;
  PERFORM omb_event_partitions_ensure((now() AT TIME ZONE 'UTC')::date, (now() AT TIME ZONE 'UTC')::date + 3);
END;
$$;
