CREATE TABLE "event_expiry" (
	"installation_id" uuid PRIMARY KEY NOT NULL,
	"expired_through_position" bigint NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "event_expiry" ADD CONSTRAINT "event_expiry_installation_id_installations_id_fk" FOREIGN KEY ("installation_id") REFERENCES "public"."installations"("id") ON DELETE cascade ON UPDATE no action;