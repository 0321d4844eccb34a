import { execFile } from 'node:child_process';
import fs from 'node:fs';
import type { Config } from '../../config.js';
import { parseMariaDbUrl } from './database.js';
import { PHP_FPM } from './php-fpm.js';
import { TOOL_PATH } from './run.js';
import { sshdDoctorChecks } from './sshd.js';
import { NGINX } from './webserver.js';
import { PHP_CLI, WORDPRESS_CORE } from './wordpress.js';

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
}

/** How the checks reach the machine; tests pass a fake one. */
export interface DoctorProbe {
  /** Standard output of `command args` (no shell, PATH = TOOL_PATH, extra env); rejects when it fails. */
  output(command: string, args: string[], env?: Record<string, string>): Promise<string>;
  exists(path: string): boolean;
  isRoot(): boolean;
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

/** The checks of the configured driver: none for the simulated driver. */
export async function doctorChecks(
  driver: Config['driver'],
  probe: DoctorProbe = systemProbe,
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
    );
    // Issue 31 (a hook of the sftp lane): the SSH server's programs and chroot rule.
    if (local.ssh)
      checks.push(...(await sshdDoctorChecks(local.hostingRoot, probe)).map((c) => Promise.resolve(c)));
  }
  return Promise.all(checks);
}

/** The Debian packages of the failed checks, each once, in check order. */
export function missingPackages(checks: readonly DoctorCheck[]): string[] {
  return [...new Set(checks.filter((c) => !c.ok && c.debianPackage).map((c) => c.debianPackage as string))];
}

/** The report `hostplane doctor` prints, and the message `serve` refuses to start with. */
export function doctorReport(driver: Config['driver'], checks: readonly DoctorCheck[]): string {
  if (driver.kind !== 'local') return `hosting driver ${driver.kind}: needs no system tools`;
  const width = Math.max(...checks.map((c) => c.name.length));
  const lines = checks.map((c) => `${c.ok ? 'ok  ' : 'FAIL'}  ${c.name.padEnd(width)}  ${c.detail}`);
  const failed = checks.filter((c) => !c.ok).length;
  lines.push(
    failed === 0
      ? `hosting driver local${driver.local?.web ? ' (LOCAL_WEB=on)' : ''}: all ${checks.length} checks pass`
      : `hosting driver local: ${failed} of ${checks.length} checks fail`,
  );
  const packages = missingPackages(checks);
  if (packages.length) lines.push(`install the missing packages: apt-get install -y ${packages.join(' ')}`);
  return lines.join('\n');
}
