// What the web-tier test files (local-web, local-web-domains, local-acme: issue 21) share: a free
// port for nginx, the install's system user, and the teardown of what the file started.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';

/** A TCP port nothing listens on now (nginx's HTTP or HTTPS port of a test file). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** The install's system user (drivers/local/names.ts `systemUser`). */
export const userOf = (installId: string) => `hp${installId.replace(/-/g, '').slice(0, 30)}`;

/**
 * Stops what a web-tier test file started: nginx and the PHP-FPM masters of its HOSTING_ROOT/web
 * (by their pid files, gracefully) and the system users of the installs it made; the caller then
 * removes the rest (`localHosting().cleanup()`).
 */
export async function stopWebTier(webDir: string, installIds: Iterable<string>): Promise<void> {
  // nginx's master and every PHP-FPM master (one per install, decision 251).
  const names = await fs.readdir(path.join(webDir, 'run')).catch(() => [] as string[]);
  for (const pidFile of names.filter((n) => /^(nginx|php-fpm.*)\.pid$/.test(n))) {
    const pid = Number(await fs.readFile(path.join(webDir, 'run', pidFile), 'utf8').catch(() => ''));
    if (pid > 1) {
      try {
        process.kill(pid, 'SIGQUIT');
      } catch {}
    }
  }
  const ids = [...installIds];
  // Issue 31 (decision 185): the install-name login entries Hostplane's sshd added (same uid).
  const marks = new Set(ids.map((id) => `hostplane login hp_${id.replace(/-/g, '')}`));
  const passwd = await fs.readFile('/etc/passwd', 'utf8').catch(() => '');
  for (const line of passwd.split('\n')) {
    const [name, , , , comment] = line.split(':');
    if (name && comment && marks.has(comment)) {
      try {
        execFileSync('userdel', ['--force', name], { stdio: 'ignore' });
      } catch {}
    }
  }
  for (const id of ids) {
    // Its group too: userdel leaves it while nginx's user is a member (as wordpress.ts removeUser does).
    for (const [tool, name] of [
      ['userdel', userOf(id)],
      ['groupdel', userOf(id)],
    ]) {
      try {
        execFileSync(tool as string, [name as string], { stdio: 'ignore' });
      } catch {}
    }
  }
  await new Promise((r) => setTimeout(r, 300));
}
