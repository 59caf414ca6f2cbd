-- The webhook signing secrets encrypted at rest (src/events/intake/webhook-secrets.ts): two new
-- nullable columns, which the previous release never reads; it keeps reading and writing `secret`,
-- which this release leaves in clear while a broker of the previous release is connected.
ALTER TABLE "webhook_secrets" ADD COLUMN "sealed" "bytea";--> statement-breakpoint
ALTER TABLE "webhook_secrets" ADD COLUMN "digest" text;--> statement-breakpoint
ALTER TABLE "webhook_secrets" ADD CONSTRAINT "webhook_secrets_digest_unique" UNIQUE("digest");
