CREATE TABLE "daily_usage" (
	"installation_id" uuid NOT NULL,
	"day" date NOT NULL,
	"kept" integer DEFAULT 0 NOT NULL,
	"skipped" integer DEFAULT 0 NOT NULL,
	"exceeded_notified" boolean DEFAULT false NOT NULL,
	CONSTRAINT "daily_usage_installation_id_day_pk" PRIMARY KEY("installation_id","day")
);
--> statement-breakpoint
CREATE TABLE "events" (
	"installation_id" uuid NOT NULL,
	"position" bigint NOT NULL,
	"id" text NOT NULL,
	"type" text NOT NULL,
	"trigger_id" uuid,
	"automation_id" text,
	"toolkit" text,
	"trigger_slug" text,
	"connected_account_id" text,
	"received_at" timestamp with time zone DEFAULT now() NOT NULL,
	"data" jsonb NOT NULL,
	CONSTRAINT "events_installation_id_position_pk" PRIMARY KEY("installation_id","position")
);
--> statement-breakpoint
CREATE TABLE "grants" (
	"jti" text PRIMARY KEY NOT NULL,
	"subject" text NOT NULL,
	"plan" text NOT NULL,
	"holder_installation_id" uuid,
	"issued_at" timestamp with time zone NOT NULL,
	"expires_at" timestamp with time zone NOT NULL,
	"presented_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "installations" (
	"id" uuid PRIMARY KEY NOT NULL,
	"token_hash" text NOT NULL,
	"composio_user_id" text NOT NULL,
	"session_id" text,
	"session_mcp_url" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"last_seen_at" timestamp with time zone DEFAULT now() NOT NULL,
	"disabled_at" timestamp with time zone,
	"last_event_position" bigint DEFAULT 0 NOT NULL,
	"acked_event_position" bigint DEFAULT 0 NOT NULL,
	CONSTRAINT "installations_token_hash_unique" UNIQUE("token_hash"),
	CONSTRAINT "installations_composio_user_id_unique" UNIQUE("composio_user_id")
);
--> statement-breakpoint
CREATE TABLE "revoked_grants" (
	"jti" text PRIMARY KEY NOT NULL,
	"revoked_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "service_settings" (
	"key" text PRIMARY KEY NOT NULL,
	"value" jsonb NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "trigger_daily_usage" (
	"trigger_id" uuid NOT NULL,
	"day" date NOT NULL,
	"kept" integer DEFAULT 0 NOT NULL,
	"skipped" integer DEFAULT 0 NOT NULL,
	"skipped_reason" text,
	CONSTRAINT "trigger_daily_usage_trigger_id_day_pk" PRIMARY KEY("trigger_id","day")
);
--> statement-breakpoint
CREATE TABLE "triggers" (
	"id" uuid PRIMARY KEY NOT NULL,
	"installation_id" uuid NOT NULL,
	"automation_id" text NOT NULL,
	"toolkit" text NOT NULL,
	"trigger_slug" text NOT NULL,
	"connected_account_id" text NOT NULL,
	"composio_trigger_id" text NOT NULL,
	"filter" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"config" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"enabled" boolean DEFAULT true NOT NULL,
	"needs_reconnect_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "triggers_composio_trigger_id_unique" UNIQUE("composio_trigger_id")
);
--> statement-breakpoint
ALTER TABLE "daily_usage" ADD CONSTRAINT "daily_usage_installation_id_installations_id_fk" FOREIGN KEY ("installation_id") REFERENCES "public"."installations"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "events" ADD CONSTRAINT "events_installation_id_installations_id_fk" FOREIGN KEY ("installation_id") REFERENCES "public"."installations"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "grants" ADD CONSTRAINT "grants_holder_installation_id_installations_id_fk" FOREIGN KEY ("holder_installation_id") REFERENCES "public"."installations"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "trigger_daily_usage" ADD CONSTRAINT "trigger_daily_usage_trigger_id_triggers_id_fk" FOREIGN KEY ("trigger_id") REFERENCES "public"."triggers"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "triggers" ADD CONSTRAINT "triggers_installation_id_installations_id_fk" FOREIGN KEY ("installation_id") REFERENCES "public"."installations"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "events_id_idx" ON "events" USING btree ("id");--> statement-breakpoint
CREATE INDEX "events_received_at_idx" ON "events" USING btree ("received_at");--> statement-breakpoint
CREATE INDEX "grants_holder_idx" ON "grants" USING btree ("holder_installation_id");--> statement-breakpoint
CREATE UNIQUE INDEX "triggers_installation_automation_idx" ON "triggers" USING btree ("installation_id","automation_id");--> statement-breakpoint
CREATE INDEX "triggers_account_idx" ON "triggers" USING btree ("connected_account_id");