import { isIP } from 'node:net';
import path from 'node:path';

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
    | { readonly kind: 'pglite'; readonly dir: string }
    | { readonly kind: 'postgres'; readonly url: string };
  /** `PUBLIC_URL`, default unset: base of absolute pagination and Location URLs (else the request's host). */
  readonly publicUrl: string | null;
  /** `HOSTPLANE_ADMIN_TOKEN`, default generated into DATA_DIR. */
  readonly adminToken: string | null;
  /** `HOSTPLANE_SECRET_KEY`, default generated into DATA_DIR. */
  readonly secretKey: string | null;
  /** `RATE_LIMIT_PER_MINUTE`, default 1200 per credential (or per IP before auth); 0 disables limits. */
  readonly rateLimitPerMinute: number;
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
  /** TXT lookups of domain verification (D7). */
  readonly dns: {
    /** `DNS_SERVERS`, default empty (the system resolvers): comma-separated `ip[:port]` / `[ipv6]:port`. */
    readonly servers: readonly string[];
    /** `DNS_TIMEOUT_MS`, default 2000: per-try query timeout. */
    readonly timeoutMs: number;
    /** `DNS_TRIES`, default 2: tries per name server before the lookup fails as a timeout. */
    readonly tries: number;
  };
}

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
      : { kind: 'pglite', dir: path.join(dataDir, 'pg') },
    publicUrl: publicUrl?.replace(/\/+$/, '') ?? null,
    adminToken,
    secretKey,
    rateLimitPerMinute: intVar(env, 'RATE_LIMIT_PER_MINUTE', 1200, 0, 10_000_000, problems),
    redisUrl: urlVar(env, 'REDIS_URL', ['redis:', 'rediss:'], problems),
    logLevel: logLevel as Config['logLevel'],
    bodyLimitBytes: intVar(env, 'BODY_LIMIT_BYTES', 1024 * 1024, 1024, 64 * 1024 * 1024, problems),
    installDomain,
    authCacheSeconds: intVar(env, 'AUTH_CACHE_SECONDS', 10, 0, 3600, problems),
    dns: Object.freeze({
      servers: Object.freeze(dnsServersVar(env, problems)),
      timeoutMs: intVar(env, 'DNS_TIMEOUT_MS', 2000, 10, 60_000, problems),
      tries: intVar(env, 'DNS_TRIES', 2, 1, 10, problems),
    }),
  };
  if (problems.length > 0) throw new ConfigError(problems);
  return Object.freeze(config);
}
