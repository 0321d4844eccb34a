CREATE TABLE "account_limits" (
	"account_id" uuid PRIMARY KEY NOT NULL,
	"visitors" bigint,
	"storage" bigint,
	"bandwidth" bigint,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "account_limits" ADD CONSTRAINT "account_limits_account_id_accounts_id_fk" FOREIGN KEY ("account_id") REFERENCES "public"."accounts"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "install_usage_daily_covering_idx" ON "install_usage_daily" USING btree ("install_id","date","visit_count","billable_visits","network_origin_bytes","network_cdn_bytes","network_total_bytes","storage_file_bytes","storage_database_bytes","request_origin_count");