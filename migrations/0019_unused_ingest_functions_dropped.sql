-- Contract: two ingest functions of the releases before 0.1.0, which 0.1.0 no longer called (it
-- ingests through omb_ingest_trigger_batch, omb_ingest_account_expiry and
-- omb_ingest_trigger_disabled). Their files are removed from migrations/functions/ with this
-- migration. Dropping a function is a catalogue change: no table is locked.
--
-- Not yet omb_ingest_trigger_message and omb_event_seen: 0.1.0's function files still name them
-- (omb_ingest_trigger_messages calls the one, omb_ingest_trigger_message the other), and a
-- contract step drops only what the previous release no longer names (docs/migrations.md).
--
-- contract: omb_ingest_trigger_messages, unused since 0.1.0
DROP FUNCTION IF EXISTS omb_ingest_trigger_messages(jsonb);
--> statement-breakpoint
-- contract: omb_ingest_account_expired, unused since 0.1.0
DROP FUNCTION IF EXISTS omb_ingest_account_expired(text, text, text, text, timestamptz);
