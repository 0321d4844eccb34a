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
  };
  if (problems.length > 0) throw new ConfigError(problems);
  return Object.freeze(config);
}
