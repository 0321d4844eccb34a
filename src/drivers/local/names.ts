import path from 'node:path';

/**
 * Every name the local driver derives, in one place: from an install id its directory and database
 * names (`hp_<hex>`), from an operation key its staging and backup names, and where each of an
 * install's directories lives under HOSTING_ROOT. Each is checked before it reaches a path or SQL.
 */

/** A directory name derived from an install id: only `hp_` and hex, so safe in paths and SQL. */
export function installSlug(installId: string): string {
  const hex = installId.toLowerCase().replace(/-/g, '');
  if (!/^[0-9a-f]{32}$/.test(hex)) throw new Error(`not an install id: ${JSON.stringify(installId)}`);
  return `hp_${hex}`;
}

/** A directory name derived from an idempotency key (`<uuid>` or `<uuid>:<step>`), validated. */
export function keySlug(key: string): string {
  if (!/^[0-9a-f-]{36}(:[a-z]{1,32})?$/.test(key))
    throw new Error(`unexpected driver key ${JSON.stringify(key)}`);
  return key.replace(':', '.');
}

export interface InstallPaths {
  /** HOSTING_ROOT/installs/hp_<hex> */
  root: string;
  /** The document root (what a web server would serve): backed up, restored and copied. */
  public: string;
  /** Outside the document root: logs, configuration the site must not serve. */
  private: string;
  /** Purged by purge_cache. */
  cache: string;
  /** Backups of this install: HOSTING_ROOT/backups/hp_<hex>/<key>. */
  backups: string;
}

export function pathsOf(hostingRoot: string, installId: string): InstallPaths {
  const slug = installSlug(installId);
  const root = path.join(hostingRoot, 'installs', slug);
  return {
    root,
    public: path.join(root, 'public'),
    private: path.join(root, 'private'),
    cache: path.join(root, 'cache'),
    backups: path.join(hostingRoot, 'backups', slug),
  };
}

/** The install's MariaDB database and user, and the two scratch databases a restore or copy uses. */
export function databaseNames(installId: string) {
  const slug = installSlug(installId);
  return { db: slug, user: slug, staging: slug.replace('hp_', 'hps_'), trash: slug.replace('hp_', 'hpt_') };
}

/** Where a restore or copy of `key` stages the install's new tree: HOSTING_ROOT/staging/hp_<hex>.<key>. */
export const stagingDir = (hostingRoot: string, installId: string, key: string) =>
  path.join(hostingRoot, 'staging', `${installSlug(installId)}.${keySlug(key)}`);
