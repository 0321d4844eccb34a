CREATE TABLE "fleet_calls" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"method" text NOT NULL,
	"key" text NOT NULL,
	"server_id" uuid NOT NULL,
	"install_id" uuid NOT NULL,
	"generation" integer NOT NULL,
	"input_sealed" text NOT NULL,
	"state" text DEFAULT 'queued' NOT NULL,
	"result_sealed" text,
	"error" text,
	"final" boolean DEFAULT false NOT NULL,
	"waiting_reason" text,
	"job_id" uuid,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"settled_at" timestamp with time zone,
	CONSTRAINT "fleet_calls_state_check" CHECK ("fleet_calls"."state" in ('queued', 'done', 'failed'))
);
--> statement-breakpoint
CREATE TABLE "install_placements" (
	"install_id" uuid PRIMARY KEY NOT NULL,
	"server_id" uuid NOT NULL,
	"generation" integer DEFAULT 1 NOT NULL,
	"placed_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "servers" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"name" text NOT NULL,
	"labels" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"ipv4" text[] DEFAULT '{}'::text[] NOT NULL,
	"ipv6" text[] DEFAULT '{}'::text[] NOT NULL,
	"capacity_installs" integer NOT NULL,
	"state" text DEFAULT 'active' NOT NULL,
	"enrolment_hash" text,
	"enrolment_expires_at" timestamp with time zone,
	"credential_hash" text,
	"previous_credential_hash" text,
	"previous_valid_until" timestamp with time zone,
	"agent_version" text,
	"agent_session" text,
	"last_heartbeat_at" timestamp with time zone,
	"reported" jsonb,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "servers_state_check" CHECK ("servers"."state" in ('active', 'cordoned', 'draining'))
);
--> statement-breakpoint
ALTER TABLE "fleet_calls" ADD CONSTRAINT "fleet_calls_server_id_servers_id_fk" FOREIGN KEY ("server_id") REFERENCES "public"."servers"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "install_placements" ADD CONSTRAINT "install_placements_server_id_servers_id_fk" FOREIGN KEY ("server_id") REFERENCES "public"."servers"("id") ON DELETE restrict ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "fleet_calls_method_key_key" ON "fleet_calls" USING btree ("method","key");--> statement-breakpoint
CREATE INDEX "fleet_calls_server_state_idx" ON "fleet_calls" USING btree ("server_id","state");--> statement-breakpoint
CREATE INDEX "install_placements_server_idx" ON "install_placements" USING btree ("server_id","install_id");--> statement-breakpoint
CREATE UNIQUE INDEX "servers_name_key" ON "servers" USING btree ("name");--> statement-breakpoint
CREATE INDEX "servers_created_idx" ON "servers" USING btree ("created_at","id");