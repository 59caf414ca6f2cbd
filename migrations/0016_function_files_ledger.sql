-- The ledger of migrations/functions/: which version (the sha256 of its file) of each database
-- function the database holds. The broker applies a function file after the versioned
-- migrations whenever its text changed (src/db/functions.ts); no migration defines a function.
--
CREATE TABLE "applied_functions" (
	"function_name" text PRIMARY KEY NOT NULL,
	"sha256" text NOT NULL,
	"applied_at" timestamp with time zone DEFAULT now() NOT NULL
);
