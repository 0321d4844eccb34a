CREATE TABLE "certificates" (
	"id" uuid PRIMARY KEY NOT NULL,
	"install_id" uuid NOT NULL,
	"chain_pem" text NOT NULL,
	"private_key_sealed" text NOT NULL,
	"subject" text NOT NULL,
	"issuer" text NOT NULL,
	"serial" text NOT NULL,
	"fingerprint" text NOT NULL,
	"not_before" timestamp with time zone NOT NULL,
	"not_after" timestamp with time zone NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "domains" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"install_id" uuid NOT NULL,
	"name" text NOT NULL,
	"primary" boolean DEFAULT false NOT NULL,
	"secure_all_urls" boolean DEFAULT false NOT NULL,
	"redirect_to_id" uuid,
	"ownership_status" text DEFAULT 'TXT_VERIFICATION_PENDING' NOT NULL,
	"txt_verification_key" text,
	"txt_verification_value" text,
	"txt_verified_time" timestamp with time zone,
	"txt_verified_domain" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "certificates" ADD CONSTRAINT "certificates_install_id_installs_id_fk" FOREIGN KEY ("install_id") REFERENCES "public"."installs"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "domains" ADD CONSTRAINT "domains_install_id_installs_id_fk" FOREIGN KEY ("install_id") REFERENCES "public"."installs"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "domains" ADD CONSTRAINT "domains_redirect_to_id_domains_id_fk" FOREIGN KEY ("redirect_to_id") REFERENCES "public"."domains"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "certificates_install_id_created_idx" ON "certificates" USING btree ("install_id","created_at","id");--> statement-breakpoint
CREATE UNIQUE INDEX "domains_install_id_name_key" ON "domains" USING btree ("install_id","name");--> statement-breakpoint
CREATE UNIQUE INDEX "domains_one_primary_per_install_key" ON "domains" USING btree ("install_id") WHERE "domains"."primary";--> statement-breakpoint
CREATE UNIQUE INDEX "domains_verified_name_key" ON "domains" USING btree ("name") WHERE "domains"."ownership_status" = 'TXT_VERIFIED';--> statement-breakpoint
CREATE INDEX "domains_name_idx" ON "domains" USING btree ("name");--> statement-breakpoint
CREATE INDEX "domains_install_id_created_idx" ON "domains" USING btree ("install_id","created_at","id");--> statement-breakpoint
CREATE INDEX "domains_redirect_to_id_idx" ON "domains" USING btree ("redirect_to_id");