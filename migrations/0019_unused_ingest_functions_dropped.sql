-- Contract: the ingest path of the releases before 0.1.0, which 0.1.0 no longer called (it
-- ingests through omb_ingest_trigger_batch, omb_ingest_account_expiry and
-- omb_ingest_trigger_disabled). Of 0.1.0's files only each other's name them
-- (omb_ingest_trigger_messages calls omb_ingest_trigger_message, which calls omb_event_seen), so
-- they go together (docs/migrations.md). Their files are removed from migrations/functions/ with
-- this migration. Dropping a function is a catalogue change: no table is locked.
--
-- contract: omb_ingest_trigger_messages, unused since 0.1.0
DROP FUNCTION IF EXISTS omb_ingest_trigger_messages(jsonb);
--> statement-breakpoint
-- contract: omb_ingest_trigger_message, unused since 0.1.0
DROP FUNCTION IF EXISTS omb_ingest_trigger_message(text, text, text, jsonb, timestamptz, date, boolean, integer, integer);
--> statement-breakpoint
-- contract: omb_event_seen, unused since 0.1.0
DROP FUNCTION IF EXISTS omb_event_seen(uuid, text, timestamptz);
--> statement-breakpoint
-- contract: omb_ingest_account_expired, unused since 0.1.0
DROP FUNCTION IF EXISTS omb_ingest_account_expired(text, text, text, text, timestamptz);
