CREATE TABLE "acme_accounts" (
	"directory_url" text PRIMARY KEY NOT NULL,
	"key_sealed" text NOT NULL,
	"account_url" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "acme_orders" (
	"key" text PRIMARY KEY NOT NULL,
	"install_id" uuid NOT NULL,
	"directory_url" text NOT NULL,
	"key_sealed" text NOT NULL,
	"order_url" text,
	"chain_pem" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE INDEX "acme_orders_install_id_idx" ON "acme_orders" USING btree ("install_id");