-- The sandbox's Composio simulator keeps its world here, so sandbox accounts, Sessions,
-- triggers and consent links survive a restart of the broker. Its own schema: nothing of the
-- broker reads or writes it, and a broker on the real Composio leaves it empty.
CREATE SCHEMA IF NOT EXISTS "sandbox";
--> statement-breakpoint
-- The simulated project: its key (the broker's COMPOSIO_API_KEY in sandbox mode), its ids and the
-- counter that orders its records. One row.
CREATE TABLE "sandbox"."project" (
	"id" smallint PRIMARY KEY DEFAULT 1 NOT NULL,
	"api_key" text NOT NULL,
	"project_id" text NOT NULL,
	"org_id" text NOT NULL,
	"seq" integer NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "project_single_row" CHECK ("id" = 1)
);
--> statement-breakpoint
-- Every simulated record (Session, connected account, consent link, auth config, trigger,
-- webhook subscription, MCP session) as the simulator holds it, by kind and id.
CREATE TABLE "sandbox"."records" (
	"kind" text NOT NULL,
	"id" text NOT NULL,
	"data" jsonb NOT NULL,
	CONSTRAINT "records_pkey" PRIMARY KEY ("kind", "id"),
	CONSTRAINT "records_kind" CHECK ("kind" IN ('session', 'account', 'link', 'auth_config', 'trigger', 'subscription', 'mcp_session'))
);
