-- The MCP session ids Composio gave each installation: a forwarded MCP request may only name one
-- of its own (src/connectors/store.ts).
CREATE TABLE "mcp_sessions" (
	"installation_id" uuid NOT NULL,
	"mcp_session_id" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "mcp_sessions_installation_id_mcp_session_id_pk" PRIMARY KEY("installation_id","mcp_session_id")
);
--> statement-breakpoint
ALTER TABLE "mcp_sessions" ADD CONSTRAINT "mcp_sessions_installation_id_installations_id_fk" FOREIGN KEY ("installation_id") REFERENCES "public"."installations"("id") ON DELETE cascade ON UPDATE no action;
