-- The ids of the data keys that may protect stored values (src/data-keys/in-use.ts): a new table,
-- which the previous release never reads.
CREATE TABLE "data_keys_in_use" (
	"key_id" text PRIMARY KEY NOT NULL,
	"since" timestamp with time zone DEFAULT now() NOT NULL
);
