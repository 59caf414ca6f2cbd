-- Webhook signing secrets accepted besides COMPOSIO_WEBHOOK_SECRET (rotation without a restart).
CREATE TABLE "webhook_secrets" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "webhook_secrets_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"secret" text,
	"added_at" timestamp with time zone DEFAULT now() NOT NULL,
	"expires_at" timestamp with time zone,
	CONSTRAINT "webhook_secrets_secret_unique" UNIQUE("secret")
);
--> statement-breakpoint
-- The label of the account a trigger is on: a reconnect under that label brings the trigger back.
ALTER TABLE "triggers" ADD COLUMN "account_alias" text;
--> statement-breakpoint
-- When a sign-in link under that label was last asked for: the reconnect job watches such triggers closely.
ALTER TABLE "triggers" ADD COLUMN "reconnect_asked_at" timestamp with time zone;
