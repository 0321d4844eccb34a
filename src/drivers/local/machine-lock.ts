import fs from 'node:fs/promises';
import path from 'node:path';
import { TOOL_ENV } from './run.js';
import { spawnTool } from './spawner.js';

/**
 * Issue 30 (one writer per server): work that changes a machine's shared web configuration (nginx's
 * server blocks and their candidate directory, PHP-FPM's pools and its master) runs one at a time on
 * the machine, across every process that runs the local driver there (several `hostplane worker`
 * processes with HOSTING_DRIVER=local, or an agent beside them), not only within one process.
 *
 * The lock is flock(2) on `file` (in a root-only directory: never a path a tenant controls), held by a
 * child `flock` (util-linux) for as long as the work runs: `flock` takes it, says so, and `cat` waits
 * on a pipe from this process. Ending the pipe releases it; so does this process's end, however it
 * ends (SIGKILL included: the pipe closes, `cat` exits, the kernel drops the lock), so a crash leaves
 * no stale lock to clean up. Within a process a promise chain keeps one waiter at the lock at a time.
 */
export function machineSerial(file: string) {
  let chain: Promise<unknown> = Promise.resolve();
  return <T>(work: () => Promise<T>): Promise<T> => {
    const run = () => holding(file, work);
    const next = chain.then(run, run);
    chain = next.catch(() => undefined);
    return next;
  };
}

async function holding<T>(file: string, work: () => Promise<T>): Promise<T> {
  await fs.mkdir(path.dirname(file), { recursive: true });
  // The driver's tool environment (run.ts TOOL_ENV): the fixed PATH, nothing inherited.
  const holder = spawnTool('flock', ['--exclusive', file, '--command', 'echo held && exec cat'], {
    env: TOOL_ENV,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  // A holder that died (killed from outside) has no pipe left to end: EPIPE is no error of the work's.
  holder.stdin.on('error', () => {});
  const ended = new Promise<void>((resolve) => holder.once('close', () => resolve()));
  let stderr = '';
  holder.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  await new Promise<void>((resolve, reject) => {
    holder.stdout.once('data', () => resolve());
    holder.once('error', (err) => reject(new Error(`machine lock ${file}: ${err.message}`)));
    void ended.then(() => reject(new Error(`machine lock ${file}: flock ended: ${stderr.trim()}`)));
  });
  try {
    return await work();
  } finally {
    holder.stdin.end();
    await ended;
  }
}
