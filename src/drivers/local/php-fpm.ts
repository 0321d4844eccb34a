import fs from 'node:fs/promises';
import path from 'node:path';
import * as files from './files.js';
import { machineSerial } from './machine-lock.js';
import { configPath, type WebPaths } from './names.js';
import { run, TOOL_ENV, ToolError } from './run.js';
import { livePid, reloadOrStart, signalDaemon } from './supervise.js';
import { INSTALL_UMASK } from './wordpress.js';

/**
 * PHP-FPM for the local driver's installs (issue 21): a private master (`php-fpm8.2 -y`) reading
 * HOSTING_ROOT/web/php-fpm.conf, one pool per install in pools/ (its own system user, its own socket
 * readable by nginx only, `open_basedir` limited to the install's directories). A pool change is
 * checked with `php-fpm -t` before it is live, then the master is reloaded (started when absent,
 * stopped when no pool is left: PHP-FPM refuses to run without one).
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

export function poolConf(pool: Pool): string {
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
 * long a reload waits for them (decision #242). Meanwhile new requests wait in the pools' sockets (the
 * old children take none), so a longer bound would stall every site of the server behind one slow
 * request; a request longer than this is still cut at the reload.
 */
export const PROCESS_CONTROL_TIMEOUT_SECONDS = 10;

export function createPhpFpm(paths: WebPaths) {
  const global = (poolsDir: string) => `; Written by Hostplane (local driver, web tier).
[global]
pid = ${paths.fpmPid}
error_log = ${path.join(paths.logs, 'php-fpm.log')}
daemonize = yes
; A reload (a pool added, changed or removed: any install of the server provisioned or deleted) lets
; the requests in flight end, up to this long, instead of killing them (a 502 for another site).
process_control_timeout = ${PROCESS_CONTROL_TIMEOUT_SECONDS}s
include = ${poolsDir}/*.conf
`;
  // One change of the pools and the master at a time on the machine, across every process that runs
  // the local driver here (decision 248).
  const serial = machineSerial(path.join(paths.run, 'php-fpm.lock'));

  async function prepare() {
    for (const dir of [paths.pools, paths.run, paths.logs]) await fs.mkdir(dir, { recursive: true });
    await fs.writeFile(paths.fpmConf, global(paths.pools));
  }

  async function poolCount() {
    return (await fs.readdir(paths.pools)).filter((n) => n.endsWith('.conf')).length;
  }

  async function apply() {
    if ((await poolCount()) === 0) {
      await signalDaemon(paths.fpmPid, 'SIGQUIT');
      return;
    }
    await reloadOrStart(
      paths.fpmPid,
      'SIGUSR2',
      PHP_FPM,
      ['-y', paths.fpmConf],
      path.join(paths.logs, 'php-fpm-start.log'),
      // Issue 28: the pools' children inherit it: what the site's PHP writes is 0640/0750, readable
      // by nginx's workers (members of the install's group), by no other install.
      INSTALL_UMASK,
    );
  }

  return {
    put: (pool: Pool, signal: AbortSignal) =>
      serial(async () => {
        await prepare();
        const text = poolConf(pool);
        const dir = path.join(paths.root, 'pools-candidate');
        await files.remove(dir);
        await fs.mkdir(dir, { recursive: true });
        try {
          await fs.writeFile(path.join(dir, `${pool.slug}.conf`), text);
          const conf = path.join(dir, 'php-fpm.main');
          await fs.writeFile(conf, global(dir));
          await run(PHP_FPM, ['-t', '-y', conf], { signal, env: TOOL_ENV }).catch((err: Error) => {
            // A refused configuration: a retry writes the same one (issue 29 defect 2).
            throw new ToolError(`php-fpm refused the pool of ${pool.slug}: ${err.message}`, true);
          });
        } finally {
          await files.remove(dir);
        }
        const temp = path.join(paths.pools, `.${pool.slug}.conf.tmp`);
        await fs.writeFile(temp, text);
        await fs.rename(temp, path.join(paths.pools, `${pool.slug}.conf`));
        await apply();
      }),

    /** Starts the master when it has pools and is not running; a running one is left alone. */
    ensureRunning: () =>
      serial(async () => {
        if (await livePid(paths.fpmPid)) return;
        await prepare();
        await apply();
      }),

    remove: (slug: string) =>
      serial(async () => {
        const live = path.join(paths.pools, `${slug}.conf`);
        if (!(await files.exists(live))) return;
        await fs.rm(live, { force: true });
        await apply();
      }),
  };
}
