CREATE TABLE "account_data_versions" (
	"account_id" uuid PRIMARY KEY NOT NULL,
	"version" bigint NOT NULL
);
--> statement-breakpoint
-- Issue 14: every committed change to an account's data bumps its row in account_data_versions. The
-- triggers are deferred constraint triggers: they run at commit, after the transaction's own row locks,
-- so the version row is locked only for the commit itself (no lock-order cycle with the data rows).
CREATE FUNCTION "bump_account_version"(a uuid) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  IF a IS NULL THEN RETURN; END IF;
  INSERT INTO "account_data_versions" AS v ("account_id", "version") VALUES (a, 1)
    ON CONFLICT ("account_id") DO UPDATE SET "version" = v."version" + 1;
END $$;
--> statement-breakpoint
CREATE FUNCTION "account_version_by_account"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP <> 'INSERT' THEN PERFORM "bump_account_version"(OLD."account_id"); END IF;
  IF TG_OP = 'INSERT' OR (TG_OP = 'UPDATE' AND NEW."account_id" IS DISTINCT FROM OLD."account_id") THEN
    PERFORM "bump_account_version"(NEW."account_id");
  END IF;
  RETURN NULL;
END $$;
--> statement-breakpoint
CREATE FUNCTION "account_version_by_id"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM "bump_account_version"(CASE WHEN TG_OP = 'DELETE' THEN OLD."id" ELSE NEW."id" END);
  RETURN NULL;
END $$;
--> statement-breakpoint
CREATE FUNCTION "account_version_by_install"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP <> 'INSERT' THEN
    PERFORM "bump_account_version"((SELECT "account_id" FROM "installs" WHERE "id" = OLD."install_id"));
  END IF;
  IF TG_OP = 'INSERT' OR (TG_OP = 'UPDATE' AND NEW."install_id" IS DISTINCT FROM OLD."install_id") THEN
    PERFORM "bump_account_version"((SELECT "account_id" FROM "installs" WHERE "id" = NEW."install_id"));
  END IF;
  RETURN NULL;
END $$;
--> statement-breakpoint
CREATE FUNCTION "account_version_by_site"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP <> 'INSERT' THEN
    PERFORM "bump_account_version"((SELECT "account_id" FROM "sites" WHERE "id" = OLD."site_id"));
  END IF;
  IF TG_OP = 'INSERT' OR (TG_OP = 'UPDATE' AND NEW."site_id" IS DISTINCT FROM OLD."site_id") THEN
    PERFORM "bump_account_version"((SELECT "account_id" FROM "sites" WHERE "id" = NEW."site_id"));
  END IF;
  RETURN NULL;
END $$;
--> statement-breakpoint
CREATE FUNCTION "account_version_by_transfer"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP <> 'INSERT' THEN
    PERFORM "bump_account_version"(OLD."origin_account_id");
    PERFORM "bump_account_version"(OLD."destination_account_id");
  END IF;
  IF TG_OP <> 'DELETE' THEN
    PERFORM "bump_account_version"(NEW."origin_account_id");
    PERFORM "bump_account_version"(NEW."destination_account_id");
  END IF;
  RETURN NULL;
END $$;
--> statement-breakpoint
CREATE CONSTRAINT TRIGGER "accounts_account_version" AFTER INSERT OR UPDATE OR DELETE ON "accounts" DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION "account_version_by_id"();
--> statement-breakpoint
CREATE CONSTRAINT TRIGGER "memberships_account_version" AFTER INSERT OR UPDATE OR DELETE ON "memberships" DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION "account_version_by_account"();
--> statement-breakpoint
CREATE CONSTRAINT TRIGGER "membership_installs_account_version" AFTER INSERT OR UPDATE OR DELETE ON "membership_installs" DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION "account_version_by_account"();
--> statement-breakpoint
CREATE CONSTRAINT TRIGGER "sites_account_version" AFTER INSERT OR UPDATE OR DELETE ON "sites" DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION "account_version_by_account"();
--> statement-breakpoint
CREATE CONSTRAINT TRIGGER "installs_account_version" AFTER INSERT OR UPDATE OR DELETE ON "installs" DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION "account_version_by_account"();
--> statement-breakpoint
CREATE CONSTRAINT TRIGGER "operations_account_version" AFTER INSERT OR UPDATE OR DELETE ON "operations" DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION "account_version_by_account"();
--> statement-breakpoint
CREATE CONSTRAINT TRIGGER "backups_account_version" AFTER INSERT OR UPDATE OR DELETE ON "backups" DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION "account_version_by_account"();
--> statement-breakpoint
CREATE CONSTRAINT TRIGGER "account_limits_account_version" AFTER INSERT OR UPDATE OR DELETE ON "account_limits" DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION "account_version_by_account"();
--> statement-breakpoint
CREATE CONSTRAINT TRIGGER "invitations_account_version" AFTER INSERT OR UPDATE OR DELETE ON "invitations" DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION "account_version_by_account"();
--> statement-breakpoint
CREATE CONSTRAINT TRIGGER "domains_account_version" AFTER INSERT OR UPDATE OR DELETE ON "domains" DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION "account_version_by_install"();
--> statement-breakpoint
CREATE CONSTRAINT TRIGGER "certificates_account_version" AFTER INSERT OR UPDATE OR DELETE ON "certificates" DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION "account_version_by_install"();
--> statement-breakpoint
CREATE CONSTRAINT TRIGGER "simulated_installs_account_version" AFTER INSERT OR UPDATE OR DELETE ON "simulated_installs" DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION "account_version_by_install"();
--> statement-breakpoint
CREATE CONSTRAINT TRIGGER "offload_settings_account_version" AFTER INSERT OR UPDATE OR DELETE ON "offload_settings" DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION "account_version_by_install"();
--> statement-breakpoint
CREATE CONSTRAINT TRIGGER "domain_reports_account_version" AFTER INSERT OR UPDATE OR DELETE ON "domain_reports" DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION "account_version_by_install"();
--> statement-breakpoint
CREATE CONSTRAINT TRIGGER "site_report_schedules_account_version" AFTER INSERT OR UPDATE OR DELETE ON "site_report_schedules" DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION "account_version_by_site"();
--> statement-breakpoint
CREATE CONSTRAINT TRIGGER "site_reports_account_version" AFTER INSERT OR UPDATE OR DELETE ON "site_reports" DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION "account_version_by_site"();
--> statement-breakpoint
CREATE CONSTRAINT TRIGGER "site_transfers_account_version" AFTER INSERT OR UPDATE OR DELETE ON "site_transfers" DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION "account_version_by_transfer"();
