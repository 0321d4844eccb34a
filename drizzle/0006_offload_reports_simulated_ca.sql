CREATE TABLE "domain_reports" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"install_id" uuid NOT NULL,
	"domain_id" uuid NOT NULL,
	"domain_name" text NOT NULL,
	"result" jsonb,
	"created_at" timestamp with time zone NOT NULL,
	"completed_at" timestamp with time zone
);
--> statement-breakpoint
CREATE TABLE "offload_settings" (
	"install_id" uuid PRIMARY KEY NOT NULL,
	"largefs_settings" jsonb NOT NULL,
	"updated_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
CREATE TABLE "simulated_ca" (
	"id" text PRIMARY KEY NOT NULL,
	"cert_pem" text NOT NULL,
	"key_sealed" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "domain_reports" ADD CONSTRAINT "domain_reports_install_id_installs_id_fk" FOREIGN KEY ("install_id") REFERENCES "public"."installs"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "domain_reports" ADD CONSTRAINT "domain_reports_domain_id_domains_id_fk" FOREIGN KEY ("domain_id") REFERENCES "public"."domains"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "offload_settings" ADD CONSTRAINT "offload_settings_install_id_installs_id_fk" FOREIGN KEY ("install_id") REFERENCES "public"."installs"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "domain_reports_install_id_created_idx" ON "domain_reports" USING btree ("install_id","created_at");--> statement-breakpoint
CREATE INDEX "domain_reports_domain_id_idx" ON "domain_reports" USING btree ("domain_id");