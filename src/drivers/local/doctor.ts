import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import type { Config } from '../../config.js';
import { parseMariaDbUrl } from './database.js';
import { closedMessage, closedParents, modeProblems, nosuidOf, type StatOf, statOf } from './modes.js';
import { PHP_FPM } from './php-fpm.js';
import { TOOL_PATH } from './run.js';
import { sshdDoctorChecks, sshdRuntimeChecks } from './sshd.js';
import { NGINX } from './webserver.js';
import { INSTALL_UMASK, PHP_CLI, WORDPRESS_CORE } from './wordpress.js';

/**
 * `hostplane doctor` (issue 21): every system tool the configured hosting driver spawns, run once the
 * way the driver runs it (same PATH, no shell), each mapped to the Debian package that provides it.
 * `serve`, `api` and `worker` run the same checks before opening anything and refuse to start when
 * one fails, instead of failing at the first provisioning.
 */

export interface DoctorCheck {
  readonly name: string;
  readonly ok: boolean;
  /** The tool's own answer when it works (its version), why not otherwise. */
  readonly detail: string;
  /** The Debian package that provides it, or null when installing a package is not the fix. */
  readonly debianPackage: string | null;
  /** Not ok, but nothing fails for it (issue 28: HOSTING_ROOT not mounted nosuid): said, not refused. */
  readonly warning?: boolean;
}

/** How the checks reach the machine; tests pass a fake one. */
export interface DoctorProbe {
  /** Standard output of `command args` (no shell, PATH = TOOL_PATH, extra env); rejects when it fails. */
  output(command: string, args: string[], env?: Record<string, string>): Promise<string>;
  exists(path: string): boolean;
  isRoot(): boolean;
  /** A path's mode and owner (null: none). */
  stat: StatOf;
  /** A directory's entries (none when it does not exist). */
  list(dir: string): string[];
  /** The text of /proc/self/mountinfo. */
  mountInfo(): string;
  /** A small text file's content (null: none, or unreadable). */
  readText(path: string): string | null;
}

export const systemProbe: DoctorProbe = {
  output: (command, args, env = {}) =>
    new Promise((resolve, reject) => {
      execFile(
        command,
        args,
        { env: { PATH: TOOL_PATH, ...env }, timeout: 10_000 },
        (err, stdout, stderr) => {
          const missing = (err as NodeJS.ErrnoException | null)?.code === 'ENOENT';
          const why = missing
            ? 'not found'
            : String(stderr || err?.message)
                .trim()
                .split('\n')[0];
          if (err) reject(new Error(why));
          // nginx -v answers on stderr.
          else resolve(stdout || stderr);
        },
      );
    }),
  exists: (path) => fs.existsSync(path),
  isRoot: () => process.getuid?.() === 0,
  stat: statOf,
  list: (dir) => {
    try {
      return fs.readdirSync(dir);
    } catch {
      return [];
    }
  },
  mountInfo: () => {
    try {
      return fs.readFileSync('/proc/self/mountinfo', 'utf8');
    } catch {
      return '';
    }
  },
  readText: (p) => {
    try {
      return fs.readFileSync(p, 'utf8');
    } catch {
      return null;
    }
  },
};

const firstLine = (text: string) => text.trim().split('\n')[0]?.slice(0, 120) ?? '';

async function tool(
  probe: DoctorProbe,
  name: string,
  debianPackage: string,
  command: string,
  args: string[],
  accept: (out: string) => string | null = firstLine,
): Promise<DoctorCheck> {
  try {
    const out = await probe.output(command, args);
    const detail = accept(out);
    return detail === null
      ? { name, ok: false, detail: `${command} ${args.join(' ')}: not in its output`, debianPackage }
      : { name, ok: true, detail, debianPackage };
  } catch (err) {
    return { name, ok: false, detail: `${command}: ${(err as Error).message}`, debianPackage };
  }
}

/**
 * Issue 28 and issue 29 defect 2: the file side. The directories above HOSTING_ROOT must let the
 * install users and nginx pass (checked at every start too); with `modes` (`hostplane doctor`, not
 * the start, which sets them itself) DATA_DIR 0700, the root-owned layout of HOSTING_ROOT (backups
 * and logs root-only), the install trees closed to others, and whether HOSTING_ROOT is mounted nosuid.
 */
function fileChecks(
  local: NonNullable<Config['driver']['local']>,
  probe: DoctorProbe,
  options: { dataDir?: string; modes?: boolean },
): DoctorCheck[] {
  const web = local.web !== null;
  const root = local.hostingRoot;
  const checks: DoctorCheck[] = [];
  if (web) {
    const closed = closedParents(root, probe.stat);
    checks.push({
      name: 'HOSTING_ROOT passable by the install users and nginx',
      ok: closed.length === 0,
      detail: closed.length === 0 ? `every directory above ${root} has o+x` : closedMessage(root, closed),
      debianPackage: null,
    });
  }
  if (!options.modes) return checks;
  if (options.dataDir !== undefined) {
    const s = probe.stat(options.dataDir);
    const inside = path.relative(options.dataDir, root).split(path.sep)[0] !== '..';
    const want = inside ? 0o711 : 0o700;
    const ok = s === null || (s.mode & 0o777 & ~want) === 0;
    checks.push({
      name: 'DATA_DIR closed to other users (secret key, admin token, database)',
      ok: ok && !inside,
      warning: ok && inside,
      detail: !ok
        ? `${options.dataDir} is 0${((s?.mode ?? 0) & 0o777).toString(8)}: chmod 700 ${options.dataDir} (hostplane serve sets it at start)`
        : inside
          ? `HOSTING_ROOT ${root} is inside DATA_DIR, which must stay passable (0711): move it out (stop, mv, set HOSTING_ROOT)`
          : s === null
            ? `${options.dataDir} not made yet (made 0700 at start)`
            : `${options.dataDir} is 0${(s.mode & 0o777).toString(8)}`,
      debianPackage: null,
    });
  }
  const problems = modeProblems(root, web, probe.stat, probe.list);
  checks.push({
    name: 'HOSTING_ROOT modes (backups and logs root-only, install trees closed to others)',
    ok: problems.length === 0,
    detail:
      problems.length === 0
        ? `${root}: as the tenant model says`
        : `${problems.slice(0, 3).join('; ')}${problems.length > 3 ? ` (and ${problems.length - 3} more)` : ''}: hostplane serve sets the root-owned ones at start, an install's tree at its next provisioning`,
    debianPackage: null,
  });
  if (web) {
    // A PHP-FPM master started by an earlier version keeps its umask (its pool inherits it): each
    // install's master (decision #251) and an earlier version's shared one.
    const run = path.join(root, 'web', 'run');
    const masters = probe
      .list(run)
      .filter((name) => /^php-fpm(\.hp_[0-9a-f]{32})?\.pid$/.test(name))
      .sort()
      .map((name) => {
        const pid = probe.readText(path.join(run, name))?.trim();
        const status = pid && /^\d+$/.test(pid) ? probe.readText(`/proc/${pid}/status`) : null;
        const umask = status ? /^Umask:\s+([0-7]+)/m.exec(status)?.[1] : undefined;
        return { pid, umask };
      })
      .filter((m): m is { pid: string; umask: string } => m.umask !== undefined);
    const wrong = masters.filter((m) => Number.parseInt(m.umask, 8) !== INSTALL_UMASK);
    const ok = wrong.length === 0;
    checks.push({
      name: "PHP-FPM masters' umask (their pools': 027)",
      ok,
      warning: !ok,
      detail:
        masters.length === 0
          ? 'none running (started with 027)'
          : ok
            ? `${masters.length} running: ${masters[0]?.umask}`
            : `pid ${wrong.map((m) => `${m.pid}: ${m.umask}`).join(', ')}: what the sites' PHP writes may be readable by other installs; stop it (kill -QUIT ${wrong[0]?.pid}), the next start of hostplane serve/worker starts it with 027`,
      debianPackage: null,
    });
  }
  let existing = root;
  while (!probe.exists(existing) && path.dirname(existing) !== existing) existing = path.dirname(existing);
  const mount = nosuidOf(probe.mountInfo(), existing);
  checks.push({
    name: 'HOSTING_ROOT mounted nosuid',
    ok: mount?.nosuid === true,
    warning: mount?.nosuid !== true,
    detail: mount?.nosuid
      ? `${mount.mountPoint} is mounted nosuid`
      : `${mount?.mountPoint ?? root} is not mounted nosuid: a setuid file in a tenant's tree would run with its owner's rights; mount HOSTING_ROOT with the nosuid (and nodev) option, e.g. its own filesystem in /etc/fstab, or mount --bind ${root} ${root} && mount -o remount,bind,nosuid,nodev ${root}`,
    debianPackage: null,
  });
  return checks;
}

/** The checks of the configured driver: none for the simulated driver. */
export async function doctorChecks(
  driver: Config['driver'],
  probe: DoctorProbe = systemProbe,
  options: { dataDir?: string; modes?: boolean } = {},
): Promise<DoctorCheck[]> {
  const local = driver.local;
  if (driver.kind !== 'local' || !local) return [];
  const target = parseMariaDbUrl(local.mariadbUrl);
  const checks: Promise<DoctorCheck>[] = [
    tool(probe, 'tar (backups, restores, copies)', 'tar', 'tar', ['--version']),
    tool(probe, 'mariadb client', 'mariadb-client', 'mariadb', ['--version']),
    tool(probe, 'mariadb-dump (backups, copies)', 'mariadb-client', 'mariadb-dump', ['--version']),
  ];
  const server: Promise<DoctorCheck> = probe
    .output(
      'mariadb',
      [
        '--host',
        target.host,
        '--port',
        String(target.port),
        '--user',
        target.user,
        '--connect-timeout=5',
        '--execute=SELECT 1',
      ],
      { MYSQL_PWD: target.password },
    )
    .then(
      () => ({
        name: `MariaDB server at ${target.host}:${target.port} (MARIADB_URL)`,
        ok: true,
        detail: 'connected',
        debianPackage: null,
      }),
      (err: Error) => ({
        name: `MariaDB server at ${target.host}:${target.port} (MARIADB_URL)`,
        ok: false,
        detail: err.message,
        // A local server is a package away; a remote one is the operator's to reach.
        debianPackage: ['127.0.0.1', 'localhost', '::1', '[::1]'].includes(target.host)
          ? 'mariadb-server'
          : null,
      }),
    );
  checks.push(server);
  if (local.web) {
    checks.push(
      Promise.resolve({
        name: 'running as root (LOCAL_WEB=on: system users, daemons)',
        ok: probe.isRoot(),
        detail: probe.isRoot() ? 'uid 0' : 'not root: useradd, runuser and the pools need root',
        debianPackage: null,
      }),
      tool(probe, 'nginx', 'nginx', NGINX, ['-v']),
      tool(probe, 'php-fpm8.2', 'php8.2-fpm', PHP_FPM, ['-v']),
      tool(probe, 'php8.2 CLI (the WordPress installer)', 'php8.2-cli', PHP_CLI, ['-v']),
      tool(probe, 'php8.2 mysqli extension', 'php8.2-mysql', PHP_CLI, ['-m'], (out) =>
        out.split('\n').some((line) => line.trim().toLowerCase() === 'mysqli') ? 'mysqli loaded' : null,
      ),
      Promise.resolve(
        probe.exists(`${WORDPRESS_CORE}/wp-includes/version.php`)
          ? { name: 'WordPress core', ok: true, detail: WORDPRESS_CORE, debianPackage: 'wordpress' }
          : {
              name: 'WordPress core',
              ok: false,
              detail: `${WORDPRESS_CORE}/wp-includes/version.php not found`,
              debianPackage: 'wordpress',
            },
      ),
      tool(probe, 'useradd (install users)', 'passwd', 'useradd', ['--help']),
      tool(probe, 'userdel', 'passwd', 'userdel', ['--help']),
      tool(probe, 'runuser', 'util-linux', 'runuser', ['--version']),
      tool(probe, 'chown', 'coreutils', 'chown', ['--version']),
      tool(probe, 'usermod (nginx joins the install groups)', 'passwd', 'usermod', ['--help']),
    );
    // Issue 31 (a hook of the sftp lane): the SSH server's programs and chroot rule.
    if (local.ssh)
      checks.push(...(await sshdDoctorChecks(local.hostingRoot, probe)).map((c) => Promise.resolve(c)));
    // Issue 31: whether it runs, its configuration, its port (`hostplane doctor` only: a start makes them).
    if (local.ssh && options.modes)
      checks.push(
        ...(await sshdRuntimeChecks(local.hostingRoot, local.ssh, probe)).map((c) => Promise.resolve(c)),
      );
  }
  return [...(await Promise.all(checks)), ...fileChecks(local, probe, options)];
}

/** A check that fails (a warning does not). */
export const failing = (c: DoctorCheck) => !c.ok && !c.warning;

/** The Debian packages of the failed checks, each once, in check order. */
export function missingPackages(checks: readonly DoctorCheck[]): string[] {
  return [...new Set(checks.filter((c) => !c.ok && c.debianPackage).map((c) => c.debianPackage as string))];
}

/** The report `hostplane doctor` prints, and the message `serve` refuses to start with. */
export function doctorReport(driver: Config['driver'], checks: readonly DoctorCheck[]): string {
  if (driver.kind !== 'local') return `hosting driver ${driver.kind}: needs no system tools`;
  const width = Math.max(...checks.map((c) => c.name.length));
  const lines = checks.map(
    (c) => `${c.ok ? 'ok  ' : c.warning ? 'WARN' : 'FAIL'}  ${c.name.padEnd(width)}  ${c.detail}`,
  );
  const failed = checks.filter(failing).length;
  const warned = checks.filter((c) => !c.ok && c.warning).length;
  const warnings = warned === 0 ? '' : ` (${warned} warning${warned === 1 ? '' : 's'})`;
  lines.push(
    failed === 0
      ? `hosting driver local${driver.local?.web ? ' (LOCAL_WEB=on)' : ''}: all ${checks.length} checks pass${warnings}`
      : `hosting driver local: ${failed} of ${checks.length} checks fail${warnings}`,
  );
  const packages = missingPackages(checks);
  if (packages.length) lines.push(`install the missing packages: apt-get install -y ${packages.join(' ')}`);
  return lines.join('\n');
}
