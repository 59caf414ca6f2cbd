-- Contract: 0.2.0's first way of storing trigger events' data encrypted, which never shipped in a
-- release: the broker set the sealed data aside in a temporary table (omb_stash_sealed) and the
-- events table's insert trigger (omb_events_seal, function omb_seal_event) swapped it in for the
-- clear data. The ingest functions now take the sealed data themselves
-- (omb_ingest_trigger_batch_sealed, omb_append_events_sealed). 0.1.0 never named any of them.
-- Their files are removed from migrations/functions/ with this migration. Dropping a trigger takes
-- the events table's lock for a moment (a catalogue change, under the migrations' lock_timeout).
--
-- contract: omb_events_seal, unused since 0.2.0 (never released)
DROP TRIGGER IF EXISTS omb_events_seal ON events;
--> statement-breakpoint
-- contract: omb_seal_event, unused since 0.2.0 (never released)
DROP FUNCTION IF EXISTS omb_seal_event();
--> statement-breakpoint
-- contract: omb_stash_sealed, unused since 0.2.0 (never released)
DROP FUNCTION IF EXISTS omb_stash_sealed(jsonb, text[], text[], text[]);
