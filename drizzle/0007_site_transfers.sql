CREATE TABLE "site_transfers" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"site_id" uuid NOT NULL,
	"origin_account_id" uuid NOT NULL,
	"destination_account_id" uuid NOT NULL,
	"operation_id" uuid,
	"status" text NOT NULL,
	"site_name" text NOT NULL,
	"install_names" text[] NOT NULL,
	"origin_account_name" text NOT NULL,
	"destination_account_name" text NOT NULL,
	"scheduled_time" timestamp with time zone,
	"maintenance_mode" boolean DEFAULT false NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "operations" ALTER COLUMN "install_id" DROP NOT NULL;--> statement-breakpoint
ALTER TABLE "installs" ADD COLUMN "maintenance_mode" boolean DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE "site_transfers" ADD CONSTRAINT "site_transfers_site_id_sites_id_fk" FOREIGN KEY ("site_id") REFERENCES "public"."sites"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "site_transfers" ADD CONSTRAINT "site_transfers_origin_account_id_accounts_id_fk" FOREIGN KEY ("origin_account_id") REFERENCES "public"."accounts"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "site_transfers" ADD CONSTRAINT "site_transfers_destination_account_id_accounts_id_fk" FOREIGN KEY ("destination_account_id") REFERENCES "public"."accounts"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "site_transfers" ADD CONSTRAINT "site_transfers_operation_id_operations_id_fk" FOREIGN KEY ("operation_id") REFERENCES "public"."operations"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "site_transfers_one_active_key" ON "site_transfers" USING btree ("site_id") WHERE "site_transfers"."status" in ('pending', 'scheduled', 'in_progress');--> statement-breakpoint
CREATE INDEX "site_transfers_site_id_created_idx" ON "site_transfers" USING btree ("site_id","created_at","id");--> statement-breakpoint
CREATE INDEX "site_transfers_origin_created_idx" ON "site_transfers" USING btree ("origin_account_id","created_at","id");--> statement-breakpoint
CREATE INDEX "site_transfers_destination_idx" ON "site_transfers" USING btree ("destination_account_id");--> statement-breakpoint
CREATE INDEX "site_transfers_operation_id_idx" ON "site_transfers" USING btree ("operation_id");