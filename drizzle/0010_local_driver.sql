CREATE TABLE "local_installs" (
	"install_id" uuid PRIMARY KEY NOT NULL,
	"db_name" text NOT NULL,
	"db_user" text NOT NULL,
	"password_sealed" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "local_tasks" (
	"key" text PRIMARY KEY NOT NULL,
	"operation" text NOT NULL,
	"install_id" uuid,
	"result" jsonb NOT NULL,
	"completed_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
CREATE INDEX "local_tasks_install_id_idx" ON "local_tasks" USING btree ("install_id");