import fs from 'node:fs';
import { isIP } from 'node:net';
import path from 'node:path';
import { DRIVER_OPERATIONS, type DriverOperation } from './drivers/driver.js';

/** Parsed, validated, frozen configuration. The only reader of `process.env` is {@link loadConfig}. */
export interface Config {
  /** `PORT`, default 8080. */
  readonly port: number;
  /** `HOST`, default `0.0.0.0`. */
  readonly host: string;
  /** `DATA_DIR`, default `./data`: embedded database and generated secrets. */
  readonly dataDir: string;
  /** Derived from `DATABASE_URL`: PGlite in DATA_DIR when unset, PostgreSQL otherwise. */
  readonly db:
    | {
        readonly kind: 'pglite';
        readonly dir: string;
        /**
         * `PGLITE_WASM`, default `baseline`: PGlite's PostgreSQL runs on V8's baseline WASM code only
         * (faster start, less memory); `optimizing` lets V8 re-compile hot functions (heavy queries
         * ~1.4x faster, ~0.5 s and ~90 MB more at start). docs/decisions.md #122.
         */
        readonly wasm: 'baseline' | 'optimizing';
      }
    | { readonly kind: 'postgres'; readonly url: string };
  /** `PUBLIC_URL`, default unset: base of absolute pagination and Location URLs (else the request's host). */
  readonly publicUrl: string | null;
  /** `HOSTPLANE_ADMIN_TOKEN`, default generated into DATA_DIR. */
  readonly adminToken: string | null;
  /**
   * `HOSTPLANE_ADMIN_TOKEN_PREVIOUS`, default unset: during an admin token rotation, the old token,
   * still accepted beside HOSTPLANE_ADMIN_TOKEN until it is removed (docs/operations.md).
   */
  readonly adminTokenPrevious: string | null;
  /** `HOSTPLANE_SECRET_KEY`, default generated into DATA_DIR. */
  readonly secretKey: string | null;
  /** `HOSTPLANE_SECRET_KEY_OLD`, default unset: the key `hostplane reseal` re-seals stored secrets from. */
  readonly secretKeyOld: string | null;
  /** `METRICS_TOKEN`, default unset (GET /metrics is open): the Bearer token GET /metrics then requires. */
  readonly metricsToken: string | null;
  /**
   * `METRICS_PORT`, default unset: `hostplane worker` then serves GET /metrics, /healthz and /readyz on
   * this port (the API serves them on PORT).
   */
  readonly metricsPort: number | null;
  /** `RATE_LIMIT_PER_MINUTE`, default 1200 per credential (or per IP before auth); 0 disables limits. */
  readonly rateLimitPerMinute: number;
  /**
   * `TRUST_PROXY`, default unset (X-Forwarded-* are ignored): the load balancers whose
   * `X-Forwarded-For`, `-Proto` and `-Host` are believed, as a comma-separated list of addresses,
   * CIDR ranges and `loopback`, `linklocal`, `uniquelocal`, or a number of hops. The client address
   * then keys the per-IP rate limit, and the scheme and host build the pagination links.
   */
  readonly trustProxy: string[] | number | null;
  /** `REDIS_URL`, default unset: shared rate-limit store for several processes. */
  readonly redisUrl: string | null;
  /** `LOG_LEVEL`, default `info`. */
  readonly logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  /** `BODY_LIMIT_BYTES`, default 1 MiB. */
  readonly bodyLimitBytes: number;
  /** `INSTALL_DOMAIN`, default `hostplane.app`: installs get the cname `<name>.<INSTALL_DOMAIN>`. */
  readonly installDomain: string;
  /** `AUTH_CACHE_SECONDS`, default 10: how long a verified credential and its memberships are reused. */
  readonly authCacheSeconds: number;
  /** Issue 20: how password hashes are bounded and failed sign-ins counted (auth/authenticator.ts). */
  readonly authLimits: AuthLimitsConfig;
  /**
   * `READ_CACHE_ENTRIES`, default 2000 (0 disables) and `READ_CACHE_MB`, default 64: the bounded cache
   * of rendered GET bodies, kept only while the data versions they were rendered under hold.
   */
  readonly readCache: { readonly entries: number; readonly bytes: number };
  /**
   * `IDEMPOTENCY_TTL_HOURS`, default 24 (1 to 720): how long an `Idempotency-Key` and the response it
   * replays are kept (issue 22, http/idempotency.ts).
   */
  readonly idempotencyTtlHours: number;
  /** Issue 22: webhook deliveries. */
  readonly webhooks: {
    /**
     * `WEBHOOK_ALLOWED_NETWORKS`, default empty (public addresses only): comma-separated CIDRs (or
     * bare addresses) that endpoint URLs may also resolve to, e.g. an internal network. Never opens
     * link-local (169.254.0.0/16, fe80::/10) or a metadata address (169.254.169.254, fd00:ec2::254)
     * through a wider entry: only an entry inside link-local opens link-local, and only an entry of
     * exactly a metadata address opens it (issue 29 defect 3, modules/events/url-guard.ts). The old
     * `WEBHOOK_ALLOW_PRIVATE_TARGETS` stops the start with a message naming this one.
     */
    readonly allowedNetworks: readonly string[];
    /** `WEBHOOK_TIMEOUT_MS`, default 10000 (100 to 60000): one delivery attempt, connect to last byte read. */
    readonly timeoutMs: number;
  };
  /** TXT lookups of domain verification (D7). */
  readonly dns: {
    /** `DNS_SERVERS`, default empty (the system resolvers): comma-separated `ip[:port]` / `[ipv6]:port`. */
    readonly servers: readonly string[];
    /** `DNS_TIMEOUT_MS`, default 2000: per-try query timeout. */
    readonly timeoutMs: number;
    /** `DNS_TRIES`, default 2: tries per name server before the lookup fails as a timeout. */
    readonly tries: number;
  };
  /** `HOSTPLANE_CLOCK`, default `system`; `manual` enables GET|POST /admin/v1/clock (tests, demos). */
  readonly clockMode: 'system' | 'manual';
  /** `HOSTPLANE_FAULTS`, default `off`; `on` is test mode: POST /admin/v1/faults is served. */
  readonly faultsEnabled: boolean;
  /** `SMTP_URL`, default unset: mail is then kept in the outbox and listed at GET /admin/v1/mail. */
  readonly smtpUrl: string | null;
  /**
   * `HOSTPLANE_CONSOLE_DIR`, default unset: the web console's built files (served at /console); unset
   * means `packages/console/dist` of the install (docs/architecture.md).
   */
  readonly consoleDir: string | null;
  /** `MAIL_FROM`, default `Hostplane <no-reply@hostplane.invalid>`. */
  readonly mailFrom: string;
  /**
   * `HOSTING_DRIVER`, default `simulated`; `SIMULATED_DURATIONS` the simulated driver's durations.
   * `local` (issue 16) hosts installs under `HOSTING_ROOT` with databases on `MARIADB_URL`.
   */
  readonly driver: {
    /** `fleet` (issue 30): every call goes to the agent of the install's server (src/fleet/). */
    readonly kind: 'simulated' | 'local' | 'fleet';
    readonly durations: Readonly<Record<DriverOperation, number>>;
    /** Set when kind is `local`. */
    readonly local: LocalDriverConfig | null;
  };
  /** The job engine's timing (jobs/queue.ts, jobs/worker.ts). */
  readonly jobs: JobsConfig;
  /** Issue 30: hosting servers and their agents (src/modules/servers, src/fleet). */
  readonly fleet: FleetConfig;
  /**
   * `NODE_EXTRA_CA_CERTS`, default unset: a PEM file of extra trusted roots (Node's own variable).
   * Imported certificate chains may end under one of them, as under Node's built-in roots.
   */
  readonly extraCaCertsFile: string | null;
  /** Database time budgets on PostgreSQL (db/client.ts): requests give up fast, background work waits longer. */
  readonly dbBudget: DbBudgetConfig;
  /**
   * `REQUEST_TIMEOUT_MS`, default 0 (off): a request still unanswered then gets a 503. Off by default:
   * the database budgets already bound a request, and the handler goes on after this 503 (a write
   * may still commit), so it is only a last guard for deployments that want one.
   */
  readonly requestTimeoutMs: number;
  /** The HTTP server's limits on slow and oversized requests (issue 20, http/edge.ts). */
  readonly http: HttpConfig;
}

/** What the HTTP server allows a client before it cuts the connection (issue 20, http/edge.ts). */
export interface HttpConfig {
  /** `HTTP_HEADERS_TIMEOUT_MS`, default 15000: a request's headers must all arrive within this, else 408. */
  readonly headersTimeoutMs: number;
  /**
   * `HTTP_REQUEST_TIMEOUT_MS`, default 30000: the whole request, headers and body, must arrive within
   * this, else 408 and the connection closes (a body trickled a byte at a time ends here).
   */
  readonly requestTimeoutMs: number;
  /** `HTTP_KEEP_ALIVE_TIMEOUT_MS`, default 72000: an idle keep-alive connection is closed after this. */
  readonly keepAliveTimeoutMs: number;
  /**
   * `HTTP_DRAIN_MB`, default 32 (0: never): the rest of a refused body (a 413) is read and discarded
   * up to this many bytes before the answer, so a client still writing it reads the 413; a longer
   * body is not read (the 413 is sent and the connection closed at once).
   */
  readonly drainBytes: number;
  /** `HTTP_DRAIN_TIMEOUT_MS`, default 10000: how long that discarding may take (then the same). */
  readonly drainTimeoutMs: number;
}

/**
 * Issue 20 (docs/decisions.md #76): password hashing is bounded per process, and failed sign-ins are
 * counted before a hash is spent. A failure limit of 0 turns that limit off.
 */
export interface AuthLimitsConfig {
  /** `AUTH_HASH_CONCURRENCY`, default 2 (the cores of a small host): scrypt verifications at once. */
  readonly hashConcurrency: number;
  /** `AUTH_HASH_QUEUE`, default 64: verifications waiting for a slot; one more answers 503 at once. */
  readonly hashQueue: number;
  /**
   * `PASSWORD_HASH_COST`, default 15 (10-17): new credentials' scrypt N = 2^cost. Stored hashes keep
   * their own N. Lower it only for tests (docs/decisions.md #120).
   */
  readonly hashCost: number;
  /** `AUTH_FAILURE_WINDOW_SECONDS`, default 60: the window failed sign-ins are counted in. */
  readonly failureWindowSeconds: number;
  /** `AUTH_FAILURES_PER_IP`, default 20: failures from one client address in a window, then 429. */
  readonly failuresPerIp: number;
  /** `AUTH_FAILURES_PER_IP_USER`, default 5: failures for one username from one address, then 429. */
  readonly failuresPerIpUser: number;
  /**
   * `AUTH_FAILURES_PER_USER`, default 100: failures for one username from all addresses, then 429
   * for addresses that have not signed in as that user lately (so a third party cannot lock it out).
   */
  readonly failuresPerUser: number;
}

/** The local hosting driver (drivers/local/). */
export interface LocalDriverConfig {
  /**
   * `HOSTING_ROOT`: installs/, backups/ and staging/ (absolute). Default outside DATA_DIR (issue 28:
   * DATA_DIR is 0700, the hosting root must be passable): `/var/lib/hostplane/hosting` as root,
   * `<DATA_DIR>-hosting` otherwise; `DATA_DIR/hosting` when an earlier version made installs there.
   */
  readonly hostingRoot: string;
  /** `MARIADB_URL`, default `mysql://root@127.0.0.1:3306`: an account allowed to create databases and users. */
  readonly mariadbUrl: string;
  /** `LOCAL_MAX_HEAVY_OPERATIONS`, default 2: backups, restores and copies at once per worker process. */
  readonly maxHeavyOperations: number;
  /**
   * `LOCAL_WEB`, default `off`; `on` (issue 21): nginx, PHP-FPM and WordPress (Debian's packages) serve
   * the installs, on `HOSTING_HTTP_PORT` (default 80) and, for the names a certificate of the install
   * covers, on `HOSTING_HTTPS_PORT` (default 443). Null when off.
   */
  readonly web: {
    readonly httpPort: number;
    readonly httpsPort: number;
    /**
     * `LOCAL_PHP_REQUEST_TIMEOUT_SECONDS`, default 300: a site's PHP request running longer is ended by
     * its PHP-FPM master (`request_terminate_timeout`), whatever its code asked (`set_time_limit(0)`).
     */
    readonly phpRequestTimeoutSeconds: number;
  } | null;
  /**
   * Issue 31: `SSH_PORT`, default unset (off): Hostplane's own OpenSSH server (drivers/local/sshd.ts)
   * serves SFTP to each install on this port, at `SSH_ADDRESS` (default `0.0.0.0`). Needs `LOCAL_WEB=on`.
   * `SSH_SHELLS=on` (default off, decision 186): owners and full users get a shell as the install's user.
   */
  readonly ssh: { readonly port: number; readonly address: string; readonly shells: boolean } | null;
  /** Issue 21: certificate orders through ACME (RFC 8555). */
  readonly acme: {
    /** `ACME_DIRECTORY_URL`, default Let's Encrypt's production directory (https only). */
    readonly directoryUrl: string;
    /** `ACME_EMAIL`, default unset: the ACME account's contact address. */
    readonly email: string | null;
    /**
     * `ACME_CA_BUNDLE`, default unset: a PEM file of CAs trusted (besides Node's) for the ACME
     * directory's TLS only, e.g. Pebble's test CA. Verification is never turned off.
     */
    readonly caBundleFile: string | null;
  };
}

/** Issue 30: the control plane's side of the fleet, and `hostplane agent`'s settings. */
export interface FleetConfig {
  /** `FLEET_ENROLMENT_TTL_SECONDS`, default 3600: how long an enrolment token can be used (once). */
  readonly enrolmentTtlSeconds: number;
  /** `FLEET_ROTATION_GRACE_SECONDS`, default 300: the old credential's life after a rotation (or until the new one is used). */
  readonly rotationGraceSeconds: number;
  /** `FLEET_SILENT_SECONDS`, default 35: a server whose last heartbeat is older is silent (several missed heartbeats). */
  readonly silentSeconds: number;
  /** `FLEET_SILENT_FAIL_SECONDS`, default 900: a call waiting on a silent server fails after this long. */
  readonly silentFailSeconds: number;
  /** `FLEET_CHECK_SECONDS`, default 2: the remote driver's ask-again interval while a call is queued. */
  readonly checkSeconds: number;
  /** `FLEET_FETCH_WAIT_SECONDS`, default 20: the longest an agent's fetch waits for work (the long poll's bound). */
  readonly fetchWaitSeconds: number;
  /**
   * `FLEET_FETCH_POLL_MS`, default 250: how often a waiting fetch looks at its queue besides the
   * wake-up a queued call sends (decision #238): what finds a delayed ask, or a call queued while
   * the wake-up's LISTEN is away.
   */
  readonly fetchPollMs: number;
  /**
   * `FLEET_MOVE_FORWARD_SECONDS`, default 300 (0: none): after a move's switch, how long its old server
   * passes the install's requests to the new one before it is cleaned (decision #241): set it to the
   * TTL of the install's DNS records, so visitors with the old address cached are still answered.
   */
  readonly moveForwardSeconds: number;
  /** `hostplane agent` only. */
  readonly agent: {
    /** `AGENT_CONTROL_PLANE_URL`: the control plane the agent connects to (http or https). */
    readonly controlPlaneUrl: string | null;
    /** `AGENT_ENROLMENT_TOKEN`: used once, when the credential file does not exist yet. */
    readonly enrolmentToken: string | null;
    /** `AGENT_CREDENTIAL_FILE`, default `DATA_DIR/agent-credential` (written 0600). */
    readonly credentialFile: string;
    /** `AGENT_HEARTBEAT_SECONDS`, default 10. */
    readonly heartbeatSeconds: number;
    /** `AGENT_RECONCILE_SECONDS`, default 300: how often the agent compares the server with its installs. */
    readonly reconcileSeconds: number;
    /**
     * `AGENT_FAULT_KILL_BEFORE_REPORT` (tests only, needs `HOSTPLANE_FAULTS=on`): a driver method
     * (`backup`, `provision`, ...); the agent kills itself (SIGKILL) after doing the first call of it
     * and before reporting it. Null: never.
     */
    readonly killBeforeReport: string | null;
  };
}

export interface DbBudgetConfig {
  /** `DB_ACQUIRE_TIMEOUT_MS`, default 1500: how long a request waits for a pooled connection (or a new one) before its 503. */
  readonly acquireTimeoutMs: number;
  /** `DB_API_STATEMENT_TIMEOUT_MS`, default 1500: one statement of an API request; the client gives up 1 s later (a silent database). */
  readonly apiStatementTimeoutMs: number;
  /** `DB_JOB_STATEMENT_TIMEOUT_MS`, default 15000: one statement of background work (jobs, sweeps, migrations). */
  readonly jobStatementTimeoutMs: number;
}

export interface JobsConfig {
  /** `JOB_POLL_INTERVAL_MS`, default 2000: a worker's fallback poll (new jobs wake it at once by NOTIFY). */
  readonly pollIntervalMs: number;
  /** `JOB_SWEEP_INTERVAL_MS`, default 1000: how often due work (rows with run_at) is enqueued. */
  readonly sweepIntervalMs: number;
  /** `JOB_MAINTENANCE_SECONDS`, default 30: how often jobs of dead workers (past their expiry) are retried. */
  readonly maintenanceSeconds: number;
  /** `JOB_DRAIN_SECONDS`, default 30: on SIGTERM, how long running jobs may finish before they are released. */
  readonly drainSeconds: number;
  /** `JOB_EXPIRE_SECONDS`, default unset (each job's own, jobs/catalog.ts): overrides every job's expiry. */
  readonly expireSeconds: number | null;
  /** `JOB_RETRY_DELAY_SECONDS`, default unset (each job's own): overrides every job's retry delay. */
  readonly retryDelaySeconds: number | null;
  /** `JOB_HEARTBEAT_SECONDS`, default 3: how often a worker refreshes its lease and reaps dead workers' jobs. */
  readonly heartbeatSeconds: number;
  /** `JOB_LEASE_SECONDS`, default 10: a worker silent this long is dead; its running jobs are retried at once. */
  readonly leaseSeconds: number;
}

/** Simulated durations in seconds, per driver operation (`SIMULATED_DURATIONS=backup=10,copy=30`). */
export const DEFAULT_SIMULATED_DURATIONS: Readonly<Record<DriverOperation, number>> = {
  provision: 5,
  copy: 20,
  backup: 10,
  restore: 15,
  measure_disk: 3,
  purge_cache: 1,
  move_site: 10,
  issue_certificate: 5,
  apply_routing: 0,
  deprovision: 0,
};

type Env = Record<string, string | undefined>;
const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
  }
}

function intVar(
  env: Env,
  name: string,
  fallback: number,
  min: number,
  max: number,
  problems: string[],
): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  // Decimal digits only: Number() would also take " 80", "0x50" and "8e1".
  const value = /^\d+$/.test(raw) ? Number(raw) : Number.NaN;
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    problems.push(`${name} must be an integer from ${min} to ${max} (got "${raw}")`);
    return fallback;
  }
  return value;
}

function urlVar(env: Env, name: string, protocols: string[], problems: string[]): string | null {
  const raw = env[name];
  if (raw === undefined || raw === '') return null;
  try {
    const url = new URL(raw);
    if (!protocols.includes(url.protocol)) {
      problems.push(`${name} must use ${protocols.join(' or ')} (got "${url.protocol}")`);
      return null;
    }
    return raw;
  } catch {
    problems.push(`${name} is not a valid URL`);
    return null;
  }
}

const PROXY_KEYWORDS = new Set(['loopback', 'linklocal', 'uniquelocal']);

/** `TRUST_PROXY`: hops (1 to 10), or addresses, CIDR ranges and proxy-addr's keywords; never "all". */
function trustProxyVar(env: Env, problems: string[]): string[] | number | null {
  const raw = env.TRUST_PROXY?.trim();
  if (!raw) return null;
  if (/^\d+$/.test(raw)) {
    const hops = Number(raw);
    if (hops >= 1 && hops <= 10) return hops;
    problems.push(`TRUST_PROXY as a number of hops must be from 1 to 10 (got "${raw}")`);
    return null;
  }
  const entries = raw.split(',').map((e) => e.trim());
  for (const entry of entries) {
    const [address = '', prefix, extra] = entry.split('/');
    const family = isIP(address);
    const bits = family === 4 ? 32 : 128;
    const ok =
      PROXY_KEYWORDS.has(entry) ||
      (family !== 0 &&
        extra === undefined &&
        (prefix === undefined || (/^\d{1,3}$/.test(prefix) && Number(prefix) <= bits)));
    if (!ok) {
      problems.push(
        `TRUST_PROXY entries must be IP addresses, CIDR ranges, loopback, linklocal or uniquelocal (got "${entry}")`,
      );
      return null;
    }
  }
  return entries;
}

/** An address with an optional prefix length (a CIDR), of either family. */
function isCidr(entry: string): boolean {
  const [address = '', prefix, extra] = entry.split('/');
  const family = isIP(address);
  const bits = family === 4 ? 32 : 128;
  return (
    family !== 0 &&
    extra === undefined &&
    !address.includes('%') &&
    (prefix === undefined || (/^\d{1,3}$/.test(prefix) && Number(prefix) <= bits))
  );
}

/** Most entries of WEBHOOK_ALLOWED_NETWORKS. */
const MAX_ALLOWED_NETWORKS = 64;

/** `WEBHOOK_ALLOWED_NETWORKS`: CIDRs; the retired `WEBHOOK_ALLOW_PRIVATE_TARGETS` is a problem naming it. */
function allowedNetworksVar(env: Env, problems: string[]): string[] {
  if (env.WEBHOOK_ALLOW_PRIVATE_TARGETS !== undefined) {
    problems.push(
      'WEBHOOK_ALLOW_PRIVATE_TARGETS is retired (it also opened the cloud metadata address): set ' +
        'WEBHOOK_ALLOWED_NETWORKS to the networks webhooks may reach instead, e.g. ' +
        '"10.0.0.0/8,fd00::/8" (link-local and metadata addresses only when named), and remove it',
    );
  }
  const raw = env.WEBHOOK_ALLOWED_NETWORKS?.trim();
  if (!raw) return [];
  const entries = raw.split(',').map((e) => e.trim());
  if (entries.length > MAX_ALLOWED_NETWORKS) {
    problems.push(`WEBHOOK_ALLOWED_NETWORKS takes at most ${MAX_ALLOWED_NETWORKS} networks`);
    return [];
  }
  const bad = entries.filter((e) => !isCidr(e));
  if (bad.length > 0) {
    problems.push(
      `WEBHOOK_ALLOWED_NETWORKS entries must be IP addresses or CIDR ranges (got "${bad.join('", "')}")`,
    );
    return [];
  }
  return entries;
}

/** `DNS_SERVERS`: IP addresses (node:dns takes no host names) with an optional port. */
function dnsServersVar(env: Env, problems: string[]): string[] {
  const raw = env.DNS_SERVERS;
  if (raw === undefined || raw.trim() === '') return [];
  const servers = raw.split(',').map((s) => s.trim());
  for (const server of servers) {
    const match =
      /^\[([0-9a-fA-F:.]+)\](?::(\d{1,5}))?$/.exec(server) ?? /^([0-9.]+)(?::(\d{1,5}))?$/.exec(server);
    const ip = match?.[1] ?? server;
    const port = match?.[2] === undefined ? 53 : Number(match[2]);
    if (isIP(ip) === 0 || port < 1 || port > 65535) {
      problems.push(`DNS_SERVERS must be comma-separated ip[:port] or [ipv6]:port entries (got "${server}")`);
    }
  }
  return servers;
}

function durationsVar(env: Env, problems: string[]): Record<DriverOperation, number> {
  const durations = { ...DEFAULT_SIMULATED_DURATIONS };
  const raw = env.SIMULATED_DURATIONS;
  if (!raw) return durations;
  for (const part of raw.split(',')) {
    const [name = '', value = ''] = part.split('=').map((s) => s.trim());
    const seconds = Number(value);
    if (!(DRIVER_OPERATIONS as readonly string[]).includes(name)) {
      problems.push(
        `SIMULATED_DURATIONS names an unknown operation "${name}" (${DRIVER_OPERATIONS.join(', ')})`,
      );
    } else if (value === '' || !Number.isFinite(seconds) || seconds < 0 || seconds > 86_400) {
      problems.push(`SIMULATED_DURATIONS ${name} must be 0 to 86400 seconds (got "${value}")`);
    } else {
      durations[name as DriverOperation] = seconds;
    }
  }
  return durations;
}

function enumVar<T extends string>(
  env: Env,
  name: string,
  values: readonly T[],
  fallback: T,
  problems: string[],
): T {
  const raw = env[name] || fallback;
  if ((values as readonly string[]).includes(raw)) return raw as T;
  problems.push(`${name} must be one of ${values.join(', ')} (got "${raw}")`);
  return fallback;
}

function optionalInt(env: Env, name: string, min: number, max: number, problems: string[]): number | null {
  return env[name] ? intVar(env, name, min, min, max, problems) : null;
}

/** Worker leases (jobs/leases.ts): a lease outlives at least two missed heartbeats. */
function leaseVars(env: Env, problems: string[]) {
  const heartbeatSeconds = intVar(env, 'JOB_HEARTBEAT_SECONDS', 3, 1, 600, problems);
  const leaseSeconds = intVar(env, 'JOB_LEASE_SECONDS', 10, 2, 3600, problems);
  if (leaseSeconds < 2 * heartbeatSeconds) {
    problems.push(
      `JOB_LEASE_SECONDS (${leaseSeconds}) must be at least twice JOB_HEARTBEAT_SECONDS (${heartbeatSeconds})`,
    );
  }
  return { heartbeatSeconds, leaseSeconds };
}

const LETS_ENCRYPT_DIRECTORY = 'https://acme-v02.api.letsencrypt.org/directory';

function acmeVars(env: Env, problems: string[]): LocalDriverConfig['acme'] {
  const email = env.ACME_EMAIL || null;
  if (email !== null && (email.length > 254 || !/^[^\s@<>,;:"]+@[^\s@<>,;:"]+$/.test(email)))
    problems.push(`ACME_EMAIL is not an e-mail address (got "${email}")`);
  const bundle = env.ACME_CA_BUNDLE || null;
  if (bundle !== null && !path.isAbsolute(bundle)) problems.push('ACME_CA_BUNDLE must be an absolute path');
  return {
    directoryUrl: urlVar(env, 'ACME_DIRECTORY_URL', ['https:'], problems) ?? LETS_ENCRYPT_DIRECTORY,
    email,
    caBundleFile: bundle,
  };
}

/**
 * HOSTING_ROOT's default (docs/decisions.md #132): never inside DATA_DIR, which is 0700 (its secrets,
 * the embedded database) while the install users and nginx must pass through the hosting root. An
 * install tree an earlier version made at `DATA_DIR/hosting` keeps it there (DATA_DIR is then 0711:
 * `hostplane doctor` says so and how to move it).
 */
export function defaultHostingRoot(dataDir: string, isRoot = process.getuid?.() === 0): string {
  const legacy = path.join(dataDir, 'hosting');
  if (fs.existsSync(path.join(legacy, 'installs'))) return legacy;
  return isRoot ? '/var/lib/hostplane/hosting' : `${dataDir}-hosting`;
}

function driverVars(env: Env, dataDir: string, problems: string[]): Config['driver'] {
  const kind = enumVar(
    env,
    'HOSTING_DRIVER',
    ['simulated', 'local', 'fleet'] as const,
    'simulated',
    problems,
  );
  const durations = Object.freeze(durationsVar(env, problems));
  if (kind !== 'local') {
    if (env.SSH_PORT) problems.push('SSH_PORT needs HOSTING_DRIVER=local with LOCAL_WEB=on');
    return Object.freeze({ kind, durations, local: null });
  }
  const mariadbUrl =
    urlVar(env, 'MARIADB_URL', ['mysql:', 'mariadb:'], problems) ?? 'mysql://root@127.0.0.1:3306';
  const local = Object.freeze({
    hostingRoot: path.resolve(env.HOSTING_ROOT || defaultHostingRoot(dataDir)),
    mariadbUrl,
    maxHeavyOperations: intVar(env, 'LOCAL_MAX_HEAVY_OPERATIONS', 2, 1, 64, problems),
    web:
      enumVar(env, 'LOCAL_WEB', ['off', 'on'] as const, 'off', problems) === 'on'
        ? Object.freeze({
            httpPort: intVar(env, 'HOSTING_HTTP_PORT', 80, 1, 65535, problems),
            httpsPort: intVar(env, 'HOSTING_HTTPS_PORT', 443, 1, 65535, problems),
            phpRequestTimeoutSeconds: intVar(
              env,
              'LOCAL_PHP_REQUEST_TIMEOUT_SECONDS',
              300,
              1,
              86_400,
              problems,
            ),
          })
        : null,
    ssh: sshVars(env, env.LOCAL_WEB === 'on', problems),
    acme: Object.freeze(acmeVars(env, problems)),
  });
  return Object.freeze({ kind, durations, local });
}

function fleetVars(env: Env, dataDir: string, problems: string[]): FleetConfig {
  const heartbeatSeconds = intVar(env, 'AGENT_HEARTBEAT_SECONDS', 10, 1, 3600, problems);
  const token = env.AGENT_ENROLMENT_TOKEN || null;
  if (token !== null && !/^hpe_[A-Za-z0-9_-]{20,200}$/.test(token))
    problems.push('AGENT_ENROLMENT_TOKEN must be an enrolment token as POST /admin/v1/servers answered it');
  const killBeforeReport = env.AGENT_FAULT_KILL_BEFORE_REPORT || null;
  if (killBeforeReport !== null && env.HOSTPLANE_FAULTS !== 'on')
    problems.push('AGENT_FAULT_KILL_BEFORE_REPORT is a test fault: it needs HOSTPLANE_FAULTS=on');
  if (killBeforeReport !== null && !/^[a-zA-Z]{1,40}$/.test(killBeforeReport))
    problems.push('AGENT_FAULT_KILL_BEFORE_REPORT must be a driver method name (e.g. backup)');
  return Object.freeze({
    enrolmentTtlSeconds: intVar(env, 'FLEET_ENROLMENT_TTL_SECONDS', 3600, 60, 30 * 86_400, problems),
    rotationGraceSeconds: intVar(env, 'FLEET_ROTATION_GRACE_SECONDS', 300, 0, 86_400, problems),
    silentSeconds: intVar(env, 'FLEET_SILENT_SECONDS', 35, 2, 3600, problems),
    silentFailSeconds: intVar(env, 'FLEET_SILENT_FAIL_SECONDS', 900, 1, 7 * 86_400, problems),
    checkSeconds: intVar(env, 'FLEET_CHECK_SECONDS', 2, 1, 600, problems),
    fetchWaitSeconds: intVar(env, 'FLEET_FETCH_WAIT_SECONDS', 20, 0, 60, problems),
    fetchPollMs: intVar(env, 'FLEET_FETCH_POLL_MS', 250, 50, 60_000, problems),
    moveForwardSeconds: intVar(env, 'FLEET_MOVE_FORWARD_SECONDS', 300, 0, 86_400, problems),
    agent: Object.freeze({
      controlPlaneUrl:
        urlVar(env, 'AGENT_CONTROL_PLANE_URL', ['http:', 'https:'], problems)?.replace(/\/+$/, '') ?? null,
      enrolmentToken: token,
      credentialFile: path.resolve(env.AGENT_CREDENTIAL_FILE || path.join(dataDir, 'agent-credential')),
      heartbeatSeconds,
      reconcileSeconds: intVar(env, 'AGENT_RECONCILE_SECONDS', 300, 1, 86_400, problems),
      killBeforeReport,
    }),
  });
}

/** Issue 31: SSH_PORT (unset: no SSH) and SSH_ADDRESS; SFTP serves what the web tier provisions. */
function sshVars(env: Env, web: boolean, problems: string[]): LocalDriverConfig['ssh'] {
  if (!env.SSH_PORT) {
    if (env.SSH_SHELLS === 'on') problems.push('SSH_SHELLS=on needs SSH_PORT');
    return null;
  }
  const port = intVar(env, 'SSH_PORT', 0, 1, 65535, problems);
  const shells = enumVar(env, 'SSH_SHELLS', ['off', 'on'] as const, 'off', problems) === 'on';
  const address = env.SSH_ADDRESS || '0.0.0.0';
  if (!isIP(address)) problems.push('SSH_ADDRESS must be an IP address');
  if (!web) problems.push('SSH_PORT needs LOCAL_WEB=on (SFTP serves the installs the web tier provisions)');
  return Object.freeze({ port, address, shells });
}

/** The HTTP server's limits: the headers' and the drain's budgets fit in the whole request's. */
function httpVars(env: Env, problems: string[]): HttpConfig {
  const headersTimeoutMs = intVar(env, 'HTTP_HEADERS_TIMEOUT_MS', 15_000, 100, 600_000, problems);
  const requestTimeoutMs = intVar(env, 'HTTP_REQUEST_TIMEOUT_MS', 30_000, 100, 3_600_000, problems);
  const drainTimeoutMs = intVar(env, 'HTTP_DRAIN_TIMEOUT_MS', 10_000, 100, 600_000, problems);
  if (headersTimeoutMs > requestTimeoutMs) {
    problems.push(
      `HTTP_HEADERS_TIMEOUT_MS (${headersTimeoutMs}) must not exceed HTTP_REQUEST_TIMEOUT_MS (${requestTimeoutMs})`,
    );
  }
  if (drainTimeoutMs > requestTimeoutMs) {
    problems.push(
      `HTTP_DRAIN_TIMEOUT_MS (${drainTimeoutMs}) must not exceed HTTP_REQUEST_TIMEOUT_MS (${requestTimeoutMs})`,
    );
  }
  return Object.freeze({
    headersTimeoutMs,
    requestTimeoutMs,
    keepAliveTimeoutMs: intVar(env, 'HTTP_KEEP_ALIVE_TIMEOUT_MS', 72_000, 100, 3_600_000, problems),
    drainBytes: intVar(env, 'HTTP_DRAIN_MB', 32, 0, 1024, problems) * 1024 * 1024,
    drainTimeoutMs,
  });
}

/** Reads every setting at once and throws one {@link ConfigError} listing every problem. */
export function loadConfig(env: Env = process.env): Config {
  const problems: string[] = [];
  const dataDir = path.resolve(env.DATA_DIR || './data');
  const databaseUrl = urlVar(env, 'DATABASE_URL', ['postgres:', 'postgresql:'], problems);
  const publicUrl = urlVar(env, 'PUBLIC_URL', ['http:', 'https:'], problems);
  const logLevel = env.LOG_LEVEL || 'info';
  if (!(LOG_LEVELS as readonly string[]).includes(logLevel)) {
    problems.push(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')} (got "${logLevel}")`);
  }
  const adminToken = env.HOSTPLANE_ADMIN_TOKEN || null;
  if (adminToken !== null && adminToken.length < 16)
    problems.push('HOSTPLANE_ADMIN_TOKEN must be at least 16 characters');
  const secretKey = env.HOSTPLANE_SECRET_KEY || null;
  if (secretKey !== null && secretKey.length < 32)
    problems.push('HOSTPLANE_SECRET_KEY must be at least 32 characters');
  const adminTokenPrevious = env.HOSTPLANE_ADMIN_TOKEN_PREVIOUS || null;
  if (adminTokenPrevious !== null && adminTokenPrevious.length < 16)
    problems.push('HOSTPLANE_ADMIN_TOKEN_PREVIOUS must be at least 16 characters');
  const secretKeyOld = env.HOSTPLANE_SECRET_KEY_OLD || null;
  if (secretKeyOld !== null && secretKeyOld.length < 32)
    problems.push('HOSTPLANE_SECRET_KEY_OLD must be at least 32 characters');
  const metricsToken = env.METRICS_TOKEN || null;
  if (metricsToken !== null && !/^[\x21-\x7e]{16,512}$/.test(metricsToken))
    problems.push('METRICS_TOKEN must be 16 to 512 printable characters without spaces');
  const installDomain = env.INSTALL_DOMAIN || 'hostplane.app';
  if (!/^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)+$/.test(installDomain)) {
    problems.push(`INSTALL_DOMAIN must be a lower-case DNS name (got "${installDomain}")`);
  }
  const config: Config = {
    port: intVar(env, 'PORT', 8080, 0, 65535, problems),
    host: env.HOST || '0.0.0.0',
    dataDir,
    db: databaseUrl
      ? { kind: 'postgres', url: databaseUrl }
      : {
          kind: 'pglite',
          dir: path.join(dataDir, 'pg'),
          wasm: enumVar(env, 'PGLITE_WASM', ['baseline', 'optimizing'] as const, 'baseline', problems),
        },
    publicUrl: publicUrl?.replace(/\/+$/, '') ?? null,
    adminToken,
    adminTokenPrevious,
    secretKey,
    secretKeyOld,
    metricsToken,
    metricsPort: optionalInt(env, 'METRICS_PORT', 0, 65535, problems),
    rateLimitPerMinute: intVar(env, 'RATE_LIMIT_PER_MINUTE', 1200, 0, 10_000_000, problems),
    trustProxy: trustProxyVar(env, problems),
    redisUrl: urlVar(env, 'REDIS_URL', ['redis:', 'rediss:'], problems),
    logLevel: logLevel as Config['logLevel'],
    bodyLimitBytes: intVar(env, 'BODY_LIMIT_BYTES', 1024 * 1024, 1024, 64 * 1024 * 1024, problems),
    installDomain,
    authCacheSeconds: intVar(env, 'AUTH_CACHE_SECONDS', 10, 0, 3600, problems),
    authLimits: Object.freeze({
      hashConcurrency: intVar(env, 'AUTH_HASH_CONCURRENCY', 2, 1, 256, problems),
      hashQueue: intVar(env, 'AUTH_HASH_QUEUE', 64, 0, 100_000, problems),
      hashCost: intVar(env, 'PASSWORD_HASH_COST', 15, 10, 17, problems),
      failureWindowSeconds: intVar(env, 'AUTH_FAILURE_WINDOW_SECONDS', 60, 1, 86_400, problems),
      failuresPerIp: intVar(env, 'AUTH_FAILURES_PER_IP', 20, 0, 1_000_000, problems),
      failuresPerIpUser: intVar(env, 'AUTH_FAILURES_PER_IP_USER', 5, 0, 1_000_000, problems),
      failuresPerUser: intVar(env, 'AUTH_FAILURES_PER_USER', 100, 0, 1_000_000, problems),
    }),
    idempotencyTtlHours: intVar(env, 'IDEMPOTENCY_TTL_HOURS', 24, 1, 720, problems),
    webhooks: Object.freeze({
      allowedNetworks: Object.freeze(allowedNetworksVar(env, problems)),
      timeoutMs: intVar(env, 'WEBHOOK_TIMEOUT_MS', 10_000, 100, 60_000, problems),
    }),
    readCache: Object.freeze({
      entries: intVar(env, 'READ_CACHE_ENTRIES', 2000, 0, 1_000_000, problems),
      bytes: intVar(env, 'READ_CACHE_MB', 64, 1, 4096, problems) * 1024 * 1024,
    }),
    dns: Object.freeze({
      servers: Object.freeze(dnsServersVar(env, problems)),
      timeoutMs: intVar(env, 'DNS_TIMEOUT_MS', 2000, 10, 60_000, problems),
      tries: intVar(env, 'DNS_TRIES', 2, 1, 10, problems),
    }),
    clockMode: enumVar(env, 'HOSTPLANE_CLOCK', ['system', 'manual'], 'system', problems),
    faultsEnabled: enumVar(env, 'HOSTPLANE_FAULTS', ['on', 'off'], 'off', problems) === 'on',
    smtpUrl: urlVar(env, 'SMTP_URL', ['smtp:', 'smtps:'], problems),
    consoleDir: env.HOSTPLANE_CONSOLE_DIR ? path.resolve(env.HOSTPLANE_CONSOLE_DIR) : null,
    mailFrom: env.MAIL_FROM || 'Hostplane <no-reply@hostplane.invalid>',
    driver: driverVars(env, dataDir, problems),
    jobs: Object.freeze({
      pollIntervalMs: intVar(env, 'JOB_POLL_INTERVAL_MS', 2000, 50, 60_000, problems),
      sweepIntervalMs: intVar(env, 'JOB_SWEEP_INTERVAL_MS', 1000, 50, 60_000, problems),
      maintenanceSeconds: intVar(env, 'JOB_MAINTENANCE_SECONDS', 30, 1, 3600, problems),
      drainSeconds: intVar(env, 'JOB_DRAIN_SECONDS', 30, 0, 3600, problems),
      expireSeconds: optionalInt(env, 'JOB_EXPIRE_SECONDS', 1, 82_800, problems),
      retryDelaySeconds: optionalInt(env, 'JOB_RETRY_DELAY_SECONDS', 0, 3600, problems),
      ...leaseVars(env, problems),
    }),
    fleet: fleetVars(env, dataDir, problems),
    dbBudget: Object.freeze({
      acquireTimeoutMs: intVar(env, 'DB_ACQUIRE_TIMEOUT_MS', 1500, 100, 60_000, problems),
      apiStatementTimeoutMs: intVar(env, 'DB_API_STATEMENT_TIMEOUT_MS', 1500, 100, 600_000, problems),
      jobStatementTimeoutMs: intVar(env, 'DB_JOB_STATEMENT_TIMEOUT_MS', 15_000, 100, 3_600_000, problems),
    }),
    requestTimeoutMs: intVar(env, 'REQUEST_TIMEOUT_MS', 0, 0, 600_000, problems),
    http: httpVars(env, problems),
    extraCaCertsFile: env.NODE_EXTRA_CA_CERTS ? path.resolve(env.NODE_EXTRA_CA_CERTS) : null,
  };
  if (problems.length > 0) throw new ConfigError(problems);
  return Object.freeze(config);
}
