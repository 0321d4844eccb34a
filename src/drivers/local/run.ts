import { execFile, spawn } from 'node:child_process';
import { createReadStream } from 'node:fs';
import fs from 'node:fs/promises';

/**
 * How the local driver runs a system tool (tar, mariadb-dump, mariadb): an argument array, never a
 * shell, an environment of its own, stdout to a file and stdin from one when asked, stopped by the
 * job's signal.
 */

/** Runs a tool with an argument array (no shell); rejects with its stderr when it fails. */
export function run(
  command: string,
  args: string[],
  options: { signal: AbortSignal; env?: NodeJS.ProcessEnv; stdin?: string; stdout?: string },
): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      signal: options.signal,
      env: options.env ?? {},
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => {
      if (stderr.length < 4096) stderr += chunk.toString('utf8');
    });
    const done = Promise.all([
      options.stdout ? pipeTo(child.stdout, options.stdout) : drain(child.stdout),
      options.stdin ? pipeFrom(options.stdin, child.stdin) : Promise.resolve(child.stdin.end()),
    ]);
    child.on('error', (err) => {
      // Aborted (the job's signal): answered once the process has really stopped, so nothing is
      // left writing into a directory a retry is about to remove. A spawn that failed has no pid.
      if (child.pid !== undefined && child.exitCode === null && child.signalCode === null)
        child.once('close', () => reject(err));
      else reject(err);
    });
    child.on('close', (code, signal) => {
      done.then(() => {
        if (code === 0) resolve();
        else reject(new Error(`${command} exited ${code ?? signal}: ${stderr.trim().slice(0, 500)}`));
      }, reject);
    });
  });
}

async function pipeTo(readable: NodeJS.ReadableStream, file: string) {
  const handle = await fs.open(file, 'w', 0o600);
  try {
    for await (const chunk of readable) await handle.write(chunk as Buffer);
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** The PATH every tool the local driver spawns is given (no shell; `hostplane doctor` checks the same). */
export const TOOL_PATH = '/usr/sbin:/usr/bin:/sbin:/bin';
export const TOOL_ENV = Object.freeze({ PATH: TOOL_PATH });

async function drain(readable: NodeJS.ReadableStream) {
  for await (const _ of readable);
}

async function pipeFrom(file: string, writable: NodeJS.WritableStream) {
  const { pipeline } = await import('node:stream/promises');
  await pipeline(createReadStream(file), writable);
}

/** Runs a tool (no shell) and answers its standard output (small outputs only). */
export function output(command: string, args: string[], signal: AbortSignal): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(command, args, { signal, env: TOOL_ENV }, (err, stdout, stderr) => {
      if (err)
        reject(
          new Error(
            `${command} failed: ${String(stderr || err.message)
              .trim()
              .slice(0, 500)}`,
          ),
        );
      else resolve(stdout);
    });
  });
}

/**
 * Runs the tasks side by side under one signal of their own: the first failure aborts the others and
 * is thrown once all have stopped (no process is left writing into a directory a retry removes).
 */
export async function allOrAbort(signal: AbortSignal, tasks: ((signal: AbortSignal) => Promise<unknown>)[]) {
  const both = new AbortController();
  if (signal.aborted) both.abort(signal.reason);
  const onAbort = () => both.abort(signal.reason);
  signal.addEventListener('abort', onAbort, { once: true });
  let first: { error: unknown } | null = null;
  try {
    await Promise.allSettled(
      tasks.map((task) =>
        task(both.signal).catch((error: unknown) => {
          first ??= { error };
          both.abort(error);
          throw error;
        }),
      ),
    );
    if (first) throw signal.aborted ? signal.reason : (first as { error: unknown }).error;
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
}
