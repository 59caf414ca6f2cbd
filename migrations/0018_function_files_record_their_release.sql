-- Each function file's ledger row names the newest release whose broker applied its text or found
-- it current, so a broker of an older release, started on a database a newer one migrated, puts
-- none of its older function bodies back (src/db/functions.ts). Nullable (expand): 0.1.0's
-- brokers, still serving during the deploy, write the ledger without it.
--
ALTER TABLE "applied_functions" ADD COLUMN "release" text;
