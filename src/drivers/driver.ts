import type { Readable } from 'node:stream';

/**
 * The hosting driver: the one boundary between Hostplane (the control plane) and the machines that
 * hold the sites. Calls are asynchronous in the platform's sense: a call starts the work (or asks
 * about it) and answers either with the result or with the time to ask again. The caller passes an
 * idempotency `key` (the operation id and step), so asking twice never does the work twice.
 */

/** Every operation a driver performs; also the `operation` of POST /admin/v1/faults. */
export const DRIVER_OPERATIONS = [
  'provision',
  'copy',
  'backup',
  'restore',
  'measure_disk',
  'purge_cache',
  'move_site',
  'issue_certificate',
  'apply_routing',
  'deprovision',
] as const;
export type DriverOperation = (typeof DRIVER_OPERATIONS)[number];

/** A call's answer: done with a value, or still running (ask again at `checkAt`). */
export type DriverResult<T> = { done: true; value: T } | { done: false; checkAt: Date };

export interface CallContext {
  /** Idempotency key: the same key always names the same piece of work. */
  key: string;
  /** Aborted when the job's time is up (a hung call must give up). */
  signal: AbortSignal;
}

/** What a backup holds: enough to restore the install to the state it was in. */
export interface Snapshot {
  wp_version: string | null;
  file_bytes: number;
  /** Bytes per database table. */
  db_tables: Record<string, number>;
  /** Where the driver keeps the backup (the local driver: `hp_<hex>/<key>` under HOSTING_ROOT/backups). */
  location?: string;
  /** SHA-256 of the backup's artefacts (the local driver: the files archive and the database dump). */
  checksums?: { files: string; database: string };
  /**
   * Issue 30: the backup's archive as its server sent it to the control plane, for another server to
   * fetch (a copy or move across servers): the backup call's id, the archive's SHA-256 and length.
   */
  archive?: { id: string; sha256: string; bytes: number };
  /**
   * Issue 30 (decision #235): the backup holds only what changed since the backup at `base` (its
   * location on the same server): a move's final sync. Restored only onto the copy of that base,
   * which its restore checks against the whole source as it was.
   */
  incremental?: { base: string };
}

/**
 * What a backup call is asked (the install, and for a move's copy and final sync, decision #235):
 * `index_files` keeps an index of the tree taken before its archive (for a later incremental backup);
 * `changes_since` takes only what changed since the backup at `location` (which kept its index), the
 * tables whose fingerprints differ from `tables` (the target's, as its copy loaded them). A driver
 * that cannot answers a whole backup (no `incremental` in its snapshot).
 */
export type BackupRequest = InstallRef & {
  index_files?: boolean;
  changes_since?: { location: string; tables: Record<string, string> };
};

export interface RestoreResult {
  wp_version: string | null;
  /** Asked with `table_fingerprints` (decision #235): each table's, as the restore left it. */
  table_fingerprints?: Record<string, string>;
}

export interface DiskUsage {
  file_bytes: number;
  database_bytes: number;
}

/** What a driver is told about an install (the simulated one seeds its state from it). */
export interface InstallRef {
  id: string;
  name: string;
  wp_version: string | null;
}

/** C2/C3: what a copy overwrites the destination with. */
export interface CopyRequest {
  source: InstallRef;
  destination: InstallRef;
  include_files: boolean;
  include_db: boolean;
  /** Null: every table. */
  db_tables: string[] | null;
  /**
   * Issue 30: the source sits on another hosting server: its backup, taken there, is what is copied
   * (the fleet's remote driver sets it; decision #179).
   */
  source_snapshot?: Snapshot;
  /**
   * C1-C4 across servers (decision #223): the source's domain names as the
   * control plane holds them; the copied rows' links to them are rewritten to the destination's URL
   * like those to its default name (a server that does not serve the source cannot read them off its
   * own configuration). Absent: the names the driver's own server serves for the source.
   */
  source_names?: string[];
}

/** One domain of an install as the web server routes it (D1-D6). */
export interface RoutedDomain {
  /** A normalised domain name (domain-name.ts); `*.` only as a whole first label. */
  name: string;
  /** D4: the primary domain serves the site and WordPress's home/siteurl follow it. */
  primary: boolean;
  /** D5: the name of the domain this one answers 301 to (path kept), or null: it serves the site. */
  redirect_to: string | null;
  /**
   * D2 `secure_all_urls`: plain-HTTP requests for the name answer 301 to the same URL over HTTPS
   * (ACME's HTTP-01 path excepted), once a certificate covering it is served.
   */
  secure_all_urls: boolean;
}

/** A certificate of an install (L1-L2, or an order's), with its key in clear: never stored by a caller. */
export interface RoutedCertificate {
  /** The install's names it is served for (by SNI): those of its domains it covers. */
  names: string[];
  chain_pem: string;
  key_pem: string;
}

/**
 * Everything the web server needs to route an install's traffic: the whole current state, so one call
 * rebuilds it (idempotent) whatever changed.
 */
export interface RoutingRequest {
  install: InstallRef;
  /** The install's cname, `<name>.<INSTALL_DOMAIN>`: always served. */
  default_name: string;
  domains: RoutedDomain[];
  certificates: RoutedCertificate[];
  /**
   * Issue 30, a move's last step before its switch: once served, the install's page is asked for
   * through the server's own web server (its code compiled, its caches filled) and must answer, or
   * the call fails for good (the move switches only to a server that serves the install). A driver
   * without a web server ignores it.
   */
  warm?: boolean;
  /**
   * Issue 30, a move's final sync: the install's writes are refused (any request but GET, HEAD and
   * OPTIONS answers 503 with Retry-After) so that nothing written on the source after its last backup
   * is lost at the switch; reads are served. Absent or false: not frozen.
   */
  frozen?: boolean;
  /**
   * Issue 30 (decision #241): the install has moved to the server at this address (IPv4 or IPv6):
   * this server passes every request for its names there (HTTP to the same HTTP port, HTTPS to the
   * same HTTPS port with the name sent by SNI) instead of serving it, for the move's grace period,
   * so a visitor whose DNS still names this server is answered by the new one. Absent: served here.
   * A driver without a web server ignores it.
   */
  forward_to?: string;
}

/** One day of an install's traffic as the server logged it (absolute totals of the day, UTC). */
export interface TrafficDay {
  date: string;
  /** Distinct client addresses. */
  visits: number;
  requests: number;
  /** Requests not answered from the page cache, and their bytes. */
  origin_requests: number;
  origin_bytes: number;
  total_bytes: number;
}

/**
 * Issue 21: the WordPress administrator a driver made for the account owner at provisioning. The
 * password is in clear: a caller stores it sealed only, and shows it once.
 */
export interface WordPressAdmin {
  username: string;
  /** `<site URL>/wp-login.php`. */
  login_url: string;
  /** Null once the driver has forgotten it (`forgetAdminPassword`: the caller stored it). */
  password: string | null;
}

export interface HostingDriver {
  /** `simulated`, or the name of a real platform's driver. */
  readonly name: string;
  /** Expected duration of an operation in seconds (storage_refresh_expected_time, estimates). */
  estimateSeconds(operation: DriverOperation): number;
  provision(
    ctx: CallContext,
    install: InstallRef,
  ): Promise<
    DriverResult<{ wp_version: string | null; php_version: string | null; wordpress_admin?: WordPressAdmin }>
  >;
  /**
   * Issue 21: the caller has stored provisioning's administrator password (sealed, with its
   * operation): the driver drops its own copy; later answers of the same call carry none. Optional.
   */
  forgetAdminPassword?(installId: string): Promise<void>;
  /**
   * Issue 29 (defect 7): a single-use link that signs `username` in to the install's WordPress admin
   * (wp-admin) once, within `ttl_seconds`; `url` holds the link's secret (never stored or logged by a
   * caller). Called by the API while a member waits (not a job): keyed like every call. Optional: a
   * driver without WordPress sign-in has none (the API answers 409).
   */
  signInLink?(
    ctx: CallContext,
    input: { install: InstallRef; username: string; ttl_seconds: number },
  ): Promise<DriverResult<{ url: string; expires_at: string }>>;
  /** C2/C3: overwrite the destination with the source's files and/or database (all or some tables). */
  copy(
    ctx: CallContext,
    input: CopyRequest,
  ): Promise<DriverResult<{ wp_version: string | null; copied_tables: string[] }>>;
  backup(ctx: CallContext, install: BackupRequest): Promise<DriverResult<Snapshot>>;
  restore(
    ctx: CallContext,
    input: {
      install: InstallRef;
      snapshot: Snapshot;
      restore_database: boolean;
      /** Issue 30 (decision #235): the restored tables' fingerprints answered (a move's copy). */
      table_fingerprints?: boolean;
      /** Issue 30 (decision #239): the install's page asked for once restored (a move's target, routed already). */
      warm?: boolean;
    },
  ): Promise<DriverResult<RestoreResult>>;
  measureDisk(ctx: CallContext, install: InstallRef): Promise<DriverResult<DiskUsage>>;
  purgeCache(
    ctx: CallContext,
    input: { install_id: string; type: 'object' | 'page' | 'cdn' },
  ): Promise<DriverResult<Record<string, never>>>;
  moveSite(
    ctx: CallContext,
    input: { site_id: string; install_ids: string[]; destination_account_id: string },
  ): Promise<DriverResult<Record<string, never>>>;
  /**
   * createDomainCertificateOrder: a certificate for `names` from the platform's CA (Let's Encrypt on
   * the real platform). The result holds the private key: callers seal it before storing it.
   */
  issueCertificate(
    ctx: CallContext,
    input: { install: InstallRef; names: string[] },
  ): Promise<DriverResult<{ chain_pem: string; key_pem: string }>>;
  /**
   * Issue 21: serves the install's default name, its domains (the primary, the redirects) and its
   * certificates as `input` says, replacing whatever was served for it before. Answers the names served.
   */
  applyRouting(ctx: CallContext, input: RoutingRequest): Promise<DriverResult<{ names: string[] }>>;
  /** On install delete: removes what the platform holds for the install (files, database, backups). */
  deprovision(ctx: CallContext, install: InstallRef): Promise<DriverResult<Record<string, never>>>;
  /**
   * Starts what serves the installs when it is not running (the local driver's nginx and PHP-FPM,
   * issue 21), leaving running processes alone; `hostplane serve` and `worker` call it at start.
   * Optional.
   */
  start?(): Promise<void>;
  /**
   * Issue 30, the agent's reconcile (at its start and every AGENT_RECONCILE_SECONDS): what serves the
   * installs started again when it stopped, or written again from what the server holds (`repaired`),
   * what is missing of `installIds` (their server blocks, pools) as `drift`, one line each, and the
   * installs whose routing must come again from the control plane (`routing_missing`: their server
   * block is gone). Optional: a driver with nothing to compare.
   */
  reconcile?(
    installIds: string[],
  ): Promise<{ repaired: string[]; drift: string[]; routing_missing?: string[] }>;
  /**
   * Usage from the server (issue 21): the traffic logged since the last call, handed to `store` as
   * each touched day's absolute totals per install (storing them again is harmless); the driver moves
   * past those lines only once `store` resolved. Optional: a driver without server logs has none.
   */
  collectTraffic?(
    store: (installId: string, days: TrafficDay[]) => Promise<void>,
    now: Date,
  ): Promise<number>;
  /**
   * Issue 21: part of what routing sets lives in the install's content (the local driver's WordPress
   * `home` and `siteurl`, in its database), so a copy into an install or a restore of it is followed
   * by the install's apply_routing. Absent: routing is the platform's alone.
   */
  readonly routingInContent?: boolean;
  /** Releases what the driver holds open (connections); optional. */
  close?(): Promise<void>;
  /**
   * Issue 30: makes the backup `snapshot` (taken on another server, `snapshot.archive`) present on
   * this one for `installId`, from its archive (`open` streams it); answers the snapshot as this
   * server holds it (its `location` here). Checked: the archive's SHA-256, and each artefact against
   * the snapshot's checksums. Optional: a driver whose backups need no files (the simulated one).
   * `keep`: the backup is the install's for good (a move carried it, decision #226), not a one-use
   * import that the restore or copy it feeds removes.
   */
  importBackup?(
    installId: string,
    snapshot: Snapshot,
    open: () => Promise<Readable>,
    signal: AbortSignal,
    options?: { keep?: boolean },
  ): Promise<Snapshot>;
  /** listArchives: the downloadable export of a completed backup, served by its signed download link. */
  exportArchive(source: ArchiveSource): Promise<DriverFile>;
}

/**
 * A downloadable file the platform produced (a backup's archive), as a stream (issue 28 finding 9b:
 * never whole in memory); `size` is its exact length in bytes when known (Content-Length), else null.
 * The body fails (errors) rather than end short when its source turns out wrong (a checksum).
 */
export interface DriverFile {
  fileName: string;
  contentType: string;
  body: Readable;
  size: number | null;
}

/** What an archive is made from: a completed backup of the install. */
export interface ArchiveSource {
  install: InstallRef;
  backup: { id: string; description: string; completed_at: Date; snapshot: Snapshot };
}

/** A driver call that failed; the job fails and pg-boss retries it with back-off. */
export class DriverError extends Error {
  constructor(
    readonly operation: DriverOperation,
    message: string,
    /**
     * The platform refused the work for a reason a retry cannot change (an ACME challenge the CA
     * found invalid): the job ends the operation at once instead of retrying (retries would only
     * spend the CA's failed-validation limits).
     */
    readonly final = false,
  ) {
    super(message);
    this.name = 'DriverError';
  }
}

/** Total bytes of a snapshot (the backup's size). */
export function snapshotBytes(snapshot: Snapshot): number {
  return snapshot.file_bytes + Object.values(snapshot.db_tables).reduce((a, b) => a + b, 0);
}

/** The driver's view of an install row (only what a driver is told). */
export const installRef = (install: InstallRef): InstallRef => ({
  id: install.id,
  name: install.name,
  wp_version: install.wp_version,
});
