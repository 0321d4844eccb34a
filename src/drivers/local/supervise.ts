import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import { TOOL_ENV } from './run.js';

/**
 * The daemons the web tier runs (nginx, the PHP-FPM master), found by their pid files: a daemon whose
 * pid file names a live process is left alone (a restart of Hostplane does not take sites down),
 * one that is absent is started and daemonizes itself (it outlives the Hostplane process).
 */

/** The live process a pid file names, or null (no file, or a stale one). */
export async function livePid(pidFile: string): Promise<number | null> {
  let text: string;
  try {
    text = await fs.readFile(pidFile, 'utf8');
  } catch {
    return null;
  }
  const pid = Number(text.trim());
  if (!Number.isInteger(pid) || pid <= 1) return null;
  try {
    process.kill(pid, 0);
    return pid;
  } catch {
    return null;
  }
}

/**
 * Runs a daemon's start command and waits for it to exit (the daemon forks and its parent returns);
 * stdout and stderr go to `logFile`, whose end is in the error when the start fails.
 */
export async function startDaemon(
  command: string,
  args: string[],
  logFile: string,
  pidFile: string,
  umask?: number,
) {
  const log = await fs.open(logFile, 'a', 0o600);
  try {
    const code = await new Promise<number | string>((resolve, reject) => {
      // The daemon's umask (issue 28: PHP-FPM's, which its pools inherit), set around the fork only.
      const previous = umask === undefined ? null : process.umask(umask);
      let child: ReturnType<typeof spawn>;
      try {
        child = spawn(command, args, { stdio: ['ignore', log.fd, log.fd], env: TOOL_ENV });
      } finally {
        if (previous !== null) process.umask(previous);
      }
      child.on('error', reject);
      child.on('exit', (c, signal) => resolve(c ?? String(signal)));
    });
    if (code !== 0) {
      const text = await fs.readFile(logFile, 'utf8').catch(() => '');
      throw new Error(
        `${command} did not start (exit ${code}): ${text.trim().split('\n').slice(-3).join(' | ')}`,
      );
    }
  } finally {
    await log.close();
  }
  // The daemon writes its pid file just after its parent exits.
  for (let i = 0; i < 50; i++) {
    if (await livePid(pidFile)) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${command} started but wrote no pid file at ${pidFile}`);
}

/** Signals the daemon a pid file names (false: it is not running). */
export async function signalDaemon(pidFile: string, signal: NodeJS.Signals): Promise<boolean> {
  const pid = await livePid(pidFile);
  if (!pid) return false;
  process.kill(pid, signal);
  return true;
}

/**
 * Sends `signal` to the running daemon (a reload), or starts it with `command args` when it is not
 * running; its start output goes to `logFile`.
 */
export async function reloadOrStart(
  pidFile: string,
  signal: NodeJS.Signals,
  command: string,
  args: string[],
  logFile: string,
  umask?: number,
): Promise<void> {
  if (await signalDaemon(pidFile, signal)) return;
  await startDaemon(command, args, logFile, pidFile, umask);
}

/** The pids whose parent is `pid` (from /proc: each process's stat line names its parent). */
export async function childrenOf(pid: number): Promise<Set<number>> {
  const children = new Set<number>();
  for (const name of await fs.readdir('/proc').catch(() => [] as string[])) {
    if (!/^\d+$/.test(name)) continue;
    const stat = await fs.readFile(`/proc/${name}/stat`, 'utf8').catch(() => '');
    // `pid (comm) state ppid ...`: comm may hold spaces and parentheses, so from the last ')'.
    const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    if (ppid === pid) children.add(Number(name));
  }
  return children;
}

/**
 * Waits (up to `timeoutMs`) until `pid` has a child that is not in `before`: after nginx's SIGHUP, its
 * master has re-read the configuration and bound any new listening socket before it starts new
 * workers, so a new child means the reload has taken effect (decision #234). False on the timeout.
 */
export async function untilNewChild(pid: number, before: Set<number>, timeoutMs: number) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    for (const child of await childrenOf(pid)) if (!before.has(child)) return true;
    if (Date.now() >= deadline) return false;
    await new Promise((r) => setTimeout(r, 20));
  }
}
