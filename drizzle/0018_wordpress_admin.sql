ALTER TABLE "local_installs" ADD COLUMN "admin_password_sealed" text;--> statement-breakpoint
ALTER TABLE "operations" ADD COLUMN "result" jsonb;--> statement-breakpoint
ALTER TABLE "operations" ADD COLUMN "secret_sealed" text;