CREATE TABLE "site_report_schedules" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"site_id" uuid NOT NULL,
	"title" text NOT NULL,
	"template_uuid" uuid NOT NULL,
	"frequency_unit" text NOT NULL,
	"frequency_value" integer NOT NULL,
	"next_run_at" timestamp with time zone NOT NULL,
	"recipients" jsonb NOT NULL,
	"sections" jsonb NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "site_reports" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"site_id" uuid NOT NULL,
	"schedule_id" uuid,
	"title" text NOT NULL,
	"template_uuid" uuid NOT NULL,
	"period_start" timestamp with time zone NOT NULL,
	"period_end" timestamp with time zone NOT NULL,
	"recipients" jsonb NOT NULL,
	"sections" jsonb NOT NULL,
	"html" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "site_report_schedules" ADD CONSTRAINT "site_report_schedules_site_id_sites_id_fk" FOREIGN KEY ("site_id") REFERENCES "public"."sites"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "site_reports" ADD CONSTRAINT "site_reports_site_id_sites_id_fk" FOREIGN KEY ("site_id") REFERENCES "public"."sites"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "site_reports" ADD CONSTRAINT "site_reports_schedule_id_site_report_schedules_id_fk" FOREIGN KEY ("schedule_id") REFERENCES "public"."site_report_schedules"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "site_report_schedules_site_id_created_idx" ON "site_report_schedules" USING btree ("site_id","created_at","id");--> statement-breakpoint
CREATE UNIQUE INDEX "site_reports_schedule_period_key" ON "site_reports" USING btree ("schedule_id","period_start","period_end");--> statement-breakpoint
CREATE INDEX "site_reports_site_id_created_idx" ON "site_reports" USING btree ("site_id","created_at","id");