CREATE TABLE "backups" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"account_id" uuid NOT NULL,
	"install_id" uuid NOT NULL,
	"operation_id" uuid,
	"kind" text DEFAULT 'manual' NOT NULL,
	"status" text DEFAULT 'requested' NOT NULL,
	"description" text NOT NULL,
	"wordpress_version" text,
	"size_bytes" bigint,
	"snapshot" jsonb,
	"create_time" timestamp with time zone DEFAULT now() NOT NULL,
	"complete_time" timestamp with time zone
);
--> statement-breakpoint
CREATE TABLE "due_jobs" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"key" text NOT NULL,
	"name" text NOT NULL,
	"payload" jsonb NOT NULL,
	"run_at" timestamp with time zone NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "install_usage_daily" (
	"install_id" uuid NOT NULL,
	"date" date NOT NULL,
	"visit_count" bigint,
	"billable_visits" bigint,
	"network_origin_bytes" bigint,
	"network_cdn_bytes" bigint,
	"network_total_bytes" bigint,
	"storage_file_bytes" bigint,
	"storage_database_bytes" bigint,
	"request_origin_count" bigint,
	CONSTRAINT "install_usage_daily_install_id_date_pk" PRIMARY KEY("install_id","date")
);
--> statement-breakpoint
CREATE TABLE "mail_outbox" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"operation_id" uuid,
	"event" text NOT NULL,
	"to_address" text NOT NULL,
	"subject" text NOT NULL,
	"text_body" text NOT NULL,
	"html_body" text NOT NULL,
	"status" text DEFAULT 'pending' NOT NULL,
	"attempts" integer DEFAULT 0 NOT NULL,
	"last_error" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"sent_at" timestamp with time zone
);
--> statement-breakpoint
CREATE TABLE "operations" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"account_id" uuid NOT NULL,
	"install_id" uuid NOT NULL,
	"type" text NOT NULL,
	"status" text DEFAULT 'queued' NOT NULL,
	"resource_type" text NOT NULL,
	"resource_id" uuid NOT NULL,
	"input" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"state" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"error" text,
	"expected_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"started_at" timestamp with time zone,
	"completed_at" timestamp with time zone
);
--> statement-breakpoint
CREATE TABLE "simulated_faults" (
	"operation" text PRIMARY KEY NOT NULL,
	"mode" text NOT NULL,
	"remaining" integer NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "simulated_installs" (
	"install_id" uuid PRIMARY KEY NOT NULL,
	"wp_version" text,
	"file_bytes" bigint NOT NULL,
	"db_tables" jsonb NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "simulated_tasks" (
	"key" text PRIMARY KEY NOT NULL,
	"operation" text NOT NULL,
	"install_id" uuid,
	"ready_at" timestamp with time zone NOT NULL,
	"applied_at" timestamp with time zone,
	"result" jsonb,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "backups" ADD CONSTRAINT "backups_account_id_accounts_id_fk" FOREIGN KEY ("account_id") REFERENCES "public"."accounts"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "backups" ADD CONSTRAINT "backups_install_id_installs_id_fk" FOREIGN KEY ("install_id") REFERENCES "public"."installs"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "backups" ADD CONSTRAINT "backups_operation_id_operations_id_fk" FOREIGN KEY ("operation_id") REFERENCES "public"."operations"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "install_usage_daily" ADD CONSTRAINT "install_usage_daily_install_id_installs_id_fk" FOREIGN KEY ("install_id") REFERENCES "public"."installs"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "mail_outbox" ADD CONSTRAINT "mail_outbox_operation_id_operations_id_fk" FOREIGN KEY ("operation_id") REFERENCES "public"."operations"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "operations" ADD CONSTRAINT "operations_account_id_accounts_id_fk" FOREIGN KEY ("account_id") REFERENCES "public"."accounts"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "operations" ADD CONSTRAINT "operations_install_id_installs_id_fk" FOREIGN KEY ("install_id") REFERENCES "public"."installs"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "simulated_installs" ADD CONSTRAINT "simulated_installs_install_id_installs_id_fk" FOREIGN KEY ("install_id") REFERENCES "public"."installs"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "backups_install_id_created_idx" ON "backups" USING btree ("install_id","create_time","id");--> statement-breakpoint
CREATE INDEX "backups_account_id_idx" ON "backups" USING btree ("account_id");--> statement-breakpoint
CREATE INDEX "backups_operation_id_idx" ON "backups" USING btree ("operation_id");--> statement-breakpoint
CREATE UNIQUE INDEX "due_jobs_key_key" ON "due_jobs" USING btree ("key");--> statement-breakpoint
CREATE INDEX "due_jobs_run_at_idx" ON "due_jobs" USING btree ("run_at");--> statement-breakpoint
CREATE UNIQUE INDEX "mail_outbox_operation_event_to_key" ON "mail_outbox" USING btree ("operation_id","event","to_address");--> statement-breakpoint
CREATE INDEX "mail_outbox_created_idx" ON "mail_outbox" USING btree ("created_at","id");--> statement-breakpoint
CREATE INDEX "operations_install_id_created_idx" ON "operations" USING btree ("install_id","created_at","id");--> statement-breakpoint
CREATE INDEX "operations_account_id_idx" ON "operations" USING btree ("account_id");--> statement-breakpoint
CREATE INDEX "operations_resource_id_idx" ON "operations" USING btree ("resource_id");--> statement-breakpoint
CREATE UNIQUE INDEX "operations_one_open_disk_refresh_key" ON "operations" USING btree ("install_id") WHERE "operations"."type" = 'refresh_disk_usage' and "operations"."status" in ('queued', 'in_progress');--> statement-breakpoint
CREATE UNIQUE INDEX "operations_one_open_restore_key" ON "operations" USING btree ("install_id") WHERE "operations"."type" = 'restore_backup' and "operations"."status" in ('queued', 'in_progress');--> statement-breakpoint
CREATE INDEX "simulated_tasks_install_id_idx" ON "simulated_tasks" USING btree ("install_id");