import fs from 'node:fs/promises';
import path from 'node:path';
import * as files from './files.js';
import { machineSerial } from './machine-lock.js';
import { configPath, type WebPaths } from './names.js';
import { run, TOOL_ENV, ToolError } from './run.js';
import { livePid, reloadOrStart } from './supervise.js';
import { INSTALL_UMASK } from './wordpress.js';

/**
 * PHP-FPM for the local driver's installs (issue 21): one pool per install in pools/ (its own system
 * user, its own socket readable by nginx only, `open_basedir` limited to the install's directories),
 * each served by a private master of its own (`php-fpm8.2 -y pools/<slug>.main`, decision #251). A
 * pool change is checked with `php-fpm -t` before it is live, then its master is reloaded (started
 * when absent, stopped with the pool).
 */

export const PHP_FPM = '/usr/sbin/php-fpm8.2';

export interface Pool {
  slug: string;
  user: string;
  socket: string;
  /** Directories the install's PHP may open (open_basedir). */
  dirs: string[];
  /** A scratch directory of the install's (uploads, sessions). */
  tmp: string;
}

/**
 * Issue 28: what a pool's PHP may not call. Defence in depth only: the install's uid is the boundary
 * (what these would run, the site's PHP could do as the same user anyway); they take the shell away
 * from the common web shells and exploit kits.
 */
export const DISABLED_FUNCTIONS = [
  'exec',
  'shell_exec',
  'system',
  'passthru',
  'proc_open',
  'popen',
  'pcntl_exec',
  'pcntl_fork',
  'pcntl_rfork',
  'pcntl_signal',
  'pcntl_alarm',
  'pcntl_waitpid',
  'pcntl_wait',
  'pcntl_unshare',
  'pcntl_setpriority',
] as const;

/** How long a site's PHP request may run before its master ends it (LOCAL_PHP_REQUEST_TIMEOUT_SECONDS). */
export const DEFAULT_REQUEST_TIMEOUT_SECONDS = 300;

export function poolConf(pool: Pool, requestTimeoutSeconds = DEFAULT_REQUEST_TIMEOUT_SECONDS): string {
  if (!Number.isInteger(requestTimeoutSeconds) || requestTimeoutSeconds < 1)
    throw new Error(`not a request timeout: ${requestTimeoutSeconds}`);
  if (!/^hp_[0-9a-f]{32}$/.test(pool.slug)) throw new Error(`not an install slug: ${pool.slug}`);
  if (!/^hp[0-9a-f]{30}$/.test(pool.user)) throw new Error(`not an install user: ${pool.user}`);
  const dirs = pool.dirs.map(configPath).join(':');
  const tmp = configPath(pool.tmp);
  return `; Written by Hostplane for install ${pool.slug}: do not edit, it is rewritten.
[${pool.slug}]
user = ${pool.user}
group = ${pool.user}
listen = ${configPath(pool.socket)}
listen.owner = www-data
listen.group = www-data
listen.mode = 0660
pm = ondemand
pm.max_children = 5
pm.process_idle_timeout = 30s
; A request running longer is ended by the master (SIGTERM, then SIGKILL): set_time_limit(0) and
; ignore_user_abort() in the site's code do not stop it (a runaway plugin holds no child for ever).
request_terminate_timeout = ${requestTimeoutSeconds}s
php_admin_value[open_basedir] = ${dirs}
php_admin_value[upload_tmp_dir] = ${tmp}
php_admin_value[session.save_path] = ${tmp}
php_admin_value[sys_temp_dir] = ${tmp}
php_admin_value[memory_limit] = 256M
php_admin_value[disable_functions] = ${DISABLED_FUNCTIONS.join(',')}
`;
}

/**
 * PHP-FPM's `process_control_timeout` (its default, 0, kills the requests in flight at a reload): how
 * long a reload of an install's master waits for its requests in flight (decision #242). Each install
 * has a master of its own (decision #251), so only its own requests wait; a request longer than this is
 * still cut at its own pool's reload.
 */
export const PROCESS_CONTROL_TIMEOUT_SECONDS = 10;

const SLUG = /^hp_[0-9a-f]{32}$/;

/**
 * Decision #251: one PHP-FPM master per install (`php-fpm8.2 -y pools/<slug>.main`, root, its pid
 * file run/php-fpm.<slug>.pid), serving that install's pool alone (pools/<slug>.conf). A pool added,
 * changed or removed reloads or stops its own master only: the requests of every other install go on
 * (one master for every pool made each provisioning pause every site of the server behind its slowest
 * request, and a master that died took every site down). A master started by an earlier version (one
 * for all pools: run/php-fpm.pid, php-fpm.conf) is stopped at the next start and replaced.
 */
function fpmFiles(paths: WebPaths, slug: string) {
  if (!SLUG.test(slug)) throw new Error(`not an install slug: ${slug}`);
  return {
    pool: path.join(paths.pools, `${slug}.conf`),
    main: path.join(paths.pools, `${slug}.main`),
    pid: path.join(paths.run, `php-fpm.${slug}.pid`),
    log: path.join(paths.logs, `php-fpm.${slug}.log`),
  };
}

/** The slugs whose master's pid file is in run/ (any left by an install since removed included). */
async function fpmMasterSlugs(paths: WebPaths): Promise<string[]> {
  const names = await fs.readdir(paths.run).catch(() => [] as string[]);
  return names.map((n) => /^php-fpm\.(hp_[0-9a-f]{32})\.pid$/.exec(n)?.[1]).filter((s): s is string => !!s);
}

/** Waits (up to `ms`) until the process a pid named has ended; false on the timeout. */
async function gone(pid: number, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  for (;;) {
    try {
      process.kill(pid, 0);
    } catch {
      return true;
    }
    if (Date.now() >= deadline) return false;
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Stops the master a pid file names (SIGQUIT: its requests in flight end first) and waits for its end. */
async function stopMaster(pidFile: string): Promise<void> {
  const pid = await livePid(pidFile);
  if (!pid) return;
  process.kill(pid, 'SIGQUIT');
  if (!(await gone(pid, (PROCESS_CONTROL_TIMEOUT_SECONDS + 5) * 1000))) {
    process.kill(pid, 'SIGKILL');
    await gone(pid, 5000);
  }
}

export function createPhpFpm(
  paths: WebPaths,
  { requestTimeoutSeconds = DEFAULT_REQUEST_TIMEOUT_SECONDS }: { requestTimeoutSeconds?: number } = {},
) {
  const main = (slug: string, pool: string) => {
    const f = fpmFiles(paths, slug);
    return `; Written by Hostplane (local driver, web tier) for install ${slug}: do not edit, it is rewritten.
[global]
pid = ${configPath(f.pid)}
error_log = ${configPath(f.log)}
daemonize = yes
; A reload (this install's pool changed) lets its requests in flight end, up to this long.
process_control_timeout = ${PROCESS_CONTROL_TIMEOUT_SECONDS}s
include = ${configPath(pool)}
`;
  };
  const startLog = path.join(paths.logs, 'php-fpm-start.log');
  /** The master of an earlier version, one for every pool (decision #251: replaced at the next start). */
  const legacy = { pid: path.join(paths.run, 'php-fpm.pid'), conf: path.join(paths.root, 'php-fpm.conf') };
  // One change of the pools and their masters at a time on the machine, across every process that
  // runs the local driver here (decision 248).
  const serial = machineSerial(path.join(paths.run, 'php-fpm.lock'));

  async function prepare() {
    for (const dir of [paths.pools, paths.run, paths.logs]) await fs.mkdir(dir, { recursive: true });
  }

  const read = (file: string) => fs.readFile(file, 'utf8').catch(() => null);

  /** The installs that have a pool here (pools/<slug>.conf), sorted. */
  const poolSlugs = async () =>
    (await fs.readdir(paths.pools).catch(() => [] as string[]))
      .map((n) => /^(hp_[0-9a-f]{32})\.conf$/.exec(n)?.[1])
      .filter((s): s is string => !!s)
      .sort();

  /** Writes a file whole (temp file, rename). */
  async function writeWhole(file: string, text: string) {
    const temp = path.join(path.dirname(file), `.${path.basename(file)}.tmp`);
    await fs.writeFile(temp, text, { mode: 0o600 });
    await fs.rename(temp, file);
  }

  /** Starts (or reloads) the install's master. */
  async function startOrReload(slug: string) {
    const f = fpmFiles(paths, slug);
    await reloadOrStart(
      f.pid,
      'SIGUSR2',
      PHP_FPM,
      ['-y', f.main],
      startLog,
      // Issue 28: the pools' children inherit it: what the site's PHP writes is 0640/0750, readable
      // by nginx's workers (members of the install's group), by no other install.
      INSTALL_UMASK,
    );
  }

  /**
   * The shared master of an earlier version stopped (its exit unlinks every socket it bound) and its
   * file removed; answers whether one ran.
   */
  async function retireLegacy(): Promise<boolean> {
    const live = await livePid(legacy.pid);
    if (live) await stopMaster(legacy.pid);
    await fs.rm(legacy.conf, { force: true });
    return live !== null;
  }

  /**
   * Every install's master running with its socket: started when it has a pool and is not running,
   * restarted when its socket is gone (unlinked behind its back, or by an earlier version's master
   * that served the same pool and ended); a master whose pool is gone stopped. Answers those started.
   */
  async function startAll(): Promise<string[]> {
    const started: string[] = [];
    for (const slug of await poolSlugs()) {
      const f = fpmFiles(paths, slug);
      const socket = /^listen = (\/\S+)$/m.exec((await read(f.pool)) ?? '')?.[1];
      if (await livePid(f.pid)) {
        if (!socket || (await files.exists(socket))) continue;
        await stopMaster(f.pid);
      }
      const mainText = main(slug, f.pool);
      if ((await read(f.main)) !== mainText) await writeWhole(f.main, mainText);
      await startOrReload(slug);
      started.push(slug);
    }
    for (const slug of await fpmMasterSlugs(paths))
      if (!(await files.exists(fpmFiles(paths, slug).pool))) await stopMaster(fpmFiles(paths, slug).pid);
    return started;
  }

  return {
    /**
     * The install's pool, checked by `php-fpm -t` first, and its master reloaded (started when
     * absent). Nothing is reloaded when the pool and its master's file are unchanged and it runs.
     */
    put: (pool: Pool, signal: AbortSignal) =>
      serial(async () => {
        await prepare();
        const f = fpmFiles(paths, pool.slug);
        const text = poolConf(pool, requestTimeoutSeconds);
        const mainText = main(pool.slug, f.pool);
        const unchanged = (await read(f.pool)) === text && (await read(f.main)) === mainText;
        if (unchanged && (await livePid(f.pid))) return;
        if (!unchanged) {
          const dir = path.join(paths.root, 'pools-candidate');
          await files.remove(dir);
          await fs.mkdir(dir, { recursive: true });
          try {
            const candidate = path.join(dir, `${pool.slug}.conf`);
            await fs.writeFile(candidate, text);
            const conf = path.join(dir, 'php-fpm.main');
            await fs.writeFile(conf, main(pool.slug, candidate));
            await run(PHP_FPM, ['-t', '-y', conf], { signal, env: TOOL_ENV }).catch((err: Error) => {
              // A refused configuration: a retry writes the same one (issue 29 defect 2).
              throw new ToolError(`php-fpm refused the pool of ${pool.slug}: ${err.message}`, true);
            });
          } finally {
            await files.remove(dir);
          }
          await writeWhole(f.pool, text);
          await writeWhole(f.main, mainText);
        }
        // Decision #251: an earlier version's shared master serves this pool's socket too: it goes
        // first (its exit unlinks the sockets it bound), then every install's own master binds its own.
        if (await retireLegacy()) {
          if ((await startAll()).includes(pool.slug)) return;
        }
        await startOrReload(pool.slug);
      }),

    /**
     * Every install's master started when it has a pool and is not running or its socket is gone (a
     * running one is left alone); an earlier version's shared master replaced first. Answers the
     * installs whose master was started and whether an earlier version's master was replaced.
     */
    ensureRunning: () =>
      serial(async () => {
        await prepare();
        const retired = await retireLegacy();
        return { started: await startAll(), retired };
      }),

    /** The install's master stopped (its requests in flight end first) and its files removed. */
    remove: (slug: string) =>
      serial(async () => {
        const f = fpmFiles(paths, slug);
        await stopMaster(f.pid);
        for (const file of [f.pool, f.main, f.pid]) await fs.rm(file, { force: true });
      }),

    /** The installs that have a pool here (their slugs). */
    slugs: poolSlugs,
  };
}
