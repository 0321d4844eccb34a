ALTER TABLE "certificates" ADD COLUMN "expiry_warned_at" timestamp with time zone;--> statement-breakpoint
-- Issue 22: certificates stored before this migration get their expiry warning as due work too.
INSERT INTO "due_jobs" ("key", "name", "payload", "run_at")
SELECT 'certificate-expiring:' || "id", 'certificate-expiring', jsonb_build_object('certificate_id', "id"),
       greatest("not_after" - interval '14 days', now())
FROM "certificates"
ON CONFLICT ("key") DO NOTHING;
