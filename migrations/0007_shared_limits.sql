-- Limits every broker process shares. UNLOGGED: a crash may lose the counts (the limits start
-- afresh), which is fine for counters that live a minute; in exchange writes skip the WAL.

-- Fixed one-window counters for @fastify/rate-limit and the bad-signature limit, by key
-- (`<limit>:<route>:<who>`): one upsert per counted request.
CREATE UNLOGGED TABLE "rate_limit_counters" (
	"key" text PRIMARY KEY NOT NULL,
	"hits" integer NOT NULL,
	"resets_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
CREATE INDEX "rate_limit_counters_resets_at_idx" ON "rate_limit_counters" USING btree ("resets_at");
--> statement-breakpoint
-- The Composio call budget, a token bucket per project (a digest of its API key, never the key),
-- with Composio's last retry-after pause.
CREATE UNLOGGED TABLE "composio_budgets" (
	"project" text PRIMARY KEY NOT NULL,
	"tokens" double precision NOT NULL,
	"refilled_at" timestamp with time zone NOT NULL,
	"paused_until" timestamp with time zone NOT NULL
);
