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

/** The install id an install slug (`hp_<32 hex>`) is made of. */
export function installIdOfSlug(slug: string): string {
  const m = /^hp_([0-9a-f]{8})([0-9a-f]{4})([0-9a-f]{4})([0-9a-f]{4})([0-9a-f]{12})$/.exec(slug);
  if (!m) throw new Error(`not an install slug: ${JSON.stringify(slug)}`);
  return m.slice(1).join('-');
}

/**
 * A directory name derived from an idempotency key (`<uuid>` or `<uuid>:<step>`, issue 30 also a
 * move's `move:<uuid>:<step>` and steps with hyphens: `<uuid>:copy-source`), validated.
 */
export function keySlug(key: string): string {
  if (!KEY.test(key)) throw new Error(`unexpected driver key ${JSON.stringify(key)}`);
  return key.replaceAll(':', '.');
}
const KEY = /^(move:[0-9a-f-]{36}:[a-z][a-z-]{0,31}|[0-9a-f-]{36}(:[a-z][a-z-]{0,31})?)$/;

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
  /**
   * Issue 21: HTTP-01 answers (ACME), served by nginx at /.well-known/acme-challenge/ on every name
   * of the install over HTTP, never redirected. Owned by root, readable by nginx.
   */
  challenges: string;
  /** Issue 21: the install's certificates and keys (0600, root's): not readable by its PHP user. */
  tls: string;
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
    challenges: path.join(root, 'acme-challenge'),
    tls: path.join(root, 'tls'),
  };
}

/**
 * The install's MariaDB database and user, the two scratch databases a restore or copy uses, and the
 * account of a copy's URL rewrite (issue 28 finding 10: its staging database only).
 */
export function databaseNames(installId: string) {
  const slug = installSlug(installId);
  return {
    db: slug,
    user: slug,
    staging: slug.replace('hp_', 'hps_'),
    trash: slug.replace('hp_', 'hpt_'),
    rewriter: slug.replace('hp_', 'hpr_'),
  };
}

/** Where a restore or copy of the install journals its swap (staging.ts): HOSTING_ROOT/staging/hp_<hex>.swap.json. */
export const swapJournal = (hostingRoot: string, installId: string) =>
  path.join(hostingRoot, 'staging', `${installSlug(installId)}.swap.json`);

/** Where a restore or copy of `key` stages the install's new tree: HOSTING_ROOT/staging/hp_<hex>.<key>. */
export const stagingDir = (hostingRoot: string, installId: string, key: string) =>
  path.join(hostingRoot, 'staging', `${installSlug(installId)}.${keySlug(key)}`);

/** The install's system user (and group), its PHP-FPM pool's: `hp` + 30 hex (names are at most 32). */
export function systemUser(installId: string): string {
  return installSlug(installId).replace('hp_', 'hp').slice(0, 32);
}

/**
 * A host name as it may appear in a web server's configuration: lower-case DNS labels only, so no
 * character nginx or PHP-FPM would read as syntax (`;`, braces, quotes, `$`, whitespace) can pass.
 */
export function hostName(name: string): string {
  const label = '[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?';
  if (name.length > 253 || !new RegExp(`^${label}(?:\\.${label})+$`).test(name))
    throw new Error(`not a host name the web server may serve: ${JSON.stringify(name)}`);
  return name;
}

/** A name in an nginx `server_name`: a host name, or a wildcard `*.` followed by one. */
export function serverName(name: string): string {
  return name.startsWith('*.') ? `*.${hostName(name.slice(2))}` : hostName(name);
}

/** A path written into nginx or PHP-FPM configuration: absolute, and only characters neither quotes. */
export function configPath(p: string): string {
  if (!/^\/[A-Za-z0-9/._+-]*$/.test(p) || p.includes('/../'))
    throw new Error(`path unsafe in server configuration: ${JSON.stringify(p)}`);
  return p;
}

/** Where the web tier keeps its configuration, sockets, pid files and logs: HOSTING_ROOT/web. */
export function webPaths(hostingRoot: string) {
  const root = configPath(path.join(hostingRoot, 'web'));
  return {
    root,
    nginxConf: path.join(root, 'nginx.conf'),
    sites: path.join(root, 'sites'),
    /** A candidate configuration, checked by `nginx -t` before it replaces the live one. */
    candidate: path.join(root, 'candidate'),
    pools: path.join(root, 'pools'),
    run: path.join(root, 'run'),
    logs: path.join(root, 'logs'),
    tmp: path.join(root, 'tmp'),
    /** Each install's FastCGI page cache: cache/<slug>. */
    cache: path.join(root, 'cache'),
    nginxPid: path.join(root, 'run', 'nginx.pid'),
    installer: path.join(root, 'wp-install.php'),
    /** Sets an install's home and siteurl (issue 21 routing: they follow the primary domain). */
    siteUrl: path.join(root, 'wp-siteurl.php'),
    /** The copy's URL rewrite (search-replace.ts). */
    searchReplace: path.join(root, 'search-replace.php'),
  };
}

export type WebPaths = ReturnType<typeof webPaths>;
