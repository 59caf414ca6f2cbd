-- Triggers Composio stopped by itself (`composio.trigger.disabled`, or found so when the broker
-- reconciles with Composio) show it, with Composio's reason; and the Composio triggers no
-- installation holds are remembered from when they were first seen, so the reconciliation deletes
-- them only after a grace period (src/triggers/reconcile.ts).
--
CREATE TABLE "trigger_orphans" (
	"composio_trigger_id" text PRIMARY KEY NOT NULL,
	"first_seen_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "triggers" ADD COLUMN "composio_disabled_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "triggers" ADD COLUMN "composio_disabled_reason" text;
