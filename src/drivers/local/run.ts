import { createReadStream } from 'node:fs';
import fs from 'node:fs/promises';
import { spawnTool, type Tool } from './spawner.js';

/**
 * How the local driver runs a system tool (tar, mariadb-dump, mariadb): an argument array, never a
 * shell, an environment of its own, stdout to a file and stdin from one when asked, stopped by the
 * job's signal; started by the process's spawner (spawner.ts, decision #250), never forked from here.
 */

/**
 * A tool that failed (issue 29 defect 2): its message carries the last lines of what it said (stderr,
 * and stdout when it was not asked for: PHP writes its errors there), and `final` says a retry cannot
 * change the outcome (a permission refused, a tool not installed, a configuration refused): the
 * operation ends at once with that reason instead of spending its retries (tasks.ts, DriverError).
 */
export class ToolError extends Error {
  constructor(
    message: string,
    readonly final = false,
  ) {
    super(message);
    this.name = 'ToolError';
  }
}

/** What in a tool's output says a retry cannot help (permissions; PHP's unreadable script). */
const UNCHANGEABLE =
  /permission denied|operation not permitted|could not open input file|read-only file system/i;

/** Whether an error (a tool's, or a Node file operation's) is one a retry cannot change. */
export function isFinal(err: unknown): boolean {
  if ((err as { final?: unknown }).final === true) return true;
  const code = (err as NodeJS.ErrnoException).code;
  return code === 'EACCES' || code === 'EPERM' || code === 'EROFS';
}

/** The last `lines` non-empty lines of a tool's output, joined with ` | ` (at most 600 characters). */
export function lastLines(text: string, lines = 5): string {
  const kept = text
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean)
    .slice(-lines)
    .join(' | ');
  return kept.length > 600 ? `...${kept.slice(-600)}` : kept;
}

/** Keeps the last `limit` characters of a stream's text (a tool's errors come at its end). */
function tail(limit: number) {
  let text = '';
  return {
    add(chunk: Buffer) {
      text += chunk.toString('utf8');
      if (text.length > limit * 2) text = text.slice(-limit);
    },
    text: () => text.slice(-limit),
  };
}

/**
 * A tool's 'error' rejects: one not installed with a final {@link ToolError} (no retry installs it);
 * an abort (the job's signal) once the process has really stopped, so nothing is left writing into a
 * directory a retry is about to remove. A spawn that failed has no pid.
 */
function rejectOnError(child: Tool, command: string, reject: (err: unknown) => void) {
  child.on('error', (err: NodeJS.ErrnoException) => {
    const failure =
      err.code === 'ENOENT' ? new ToolError(`${command} not found (is its package installed?)`, true) : err;
    if (child.pid !== undefined && child.exitCode === null && child.signalCode === null)
      child.once('close', () => reject(failure));
    else reject(failure);
  });
}

/**
 * Runs a tool with an argument array (no shell); rejects with a {@link ToolError} carrying the end of
 * its output when it fails. `umask`: the child's (issue 28: the worker runs with 077, what an install's
 * user runs gets 027 so the web server's group reads what it writes).
 */
export function run(
  command: string,
  args: string[],
  options: { signal: AbortSignal; env?: NodeJS.ProcessEnv; stdin?: string; stdout?: string; umask?: number },
): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawnTool(command, args, {
      signal: options.signal,
      env: options.env ?? {},
      umask: options.umask,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const stderr = tail(4096);
    const stdout = tail(4096);
    child.stderr?.on('data', stderr.add);
    const out = child.stdout as NodeJS.ReadableStream;
    if (!options.stdout) out.on('data', stdout.add);
    const done = Promise.all([
      options.stdout ? pipeTo(out, options.stdout) : drain(out),
      options.stdin
        ? pipeFrom(options.stdin, child.stdin as NodeJS.WritableStream)
        : Promise.resolve(child.stdin?.end()),
    ]);
    rejectOnError(child, command, reject);
    child.on('close', (code, signal) => {
      done.then(() => {
        if (code === 0) return resolve();
        const said = lastLines(`${stdout.text()}\n${stderr.text()}`);
        reject(
          new ToolError(
            `${command} exited ${code ?? signal}: ${said || '(no output)'}`,
            UNCHANGEABLE.test(said),
          ),
        );
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
  readable.resume();
  await new Promise<void>((resolve, reject) => {
    readable.once('end', resolve);
    readable.once('close', resolve);
    readable.once('error', reject);
  });
}

async function pipeFrom(file: string, writable: NodeJS.WritableStream) {
  const { pipeline } = await import('node:stream/promises');
  await pipeline(createReadStream(file), writable);
}

/**
 * Keeps a tool's standard output up to `max` bytes; past it the tool is killed (SIGKILL) and
 * `over()` says so.
 */
export function bounded(child: Tool, max: number) {
  const chunks: Buffer[] = [];
  let size = 0;
  child.stdout.on('data', (chunk: Buffer) => {
    size += chunk.length;
    if (size <= max) chunks.push(chunk);
    else child.kill('SIGKILL');
  });
  return { over: () => size > max, text: () => Buffer.concat(chunks).toString('utf8') };
}

/** The most of a tool's standard output {@link output} keeps (a tool saying more fails). */
const OUTPUT_MAX = 1024 * 1024;

/**
 * Runs a tool (no shell) and answers its standard output (small outputs only: over 1 MiB fails). Its
 * environment is the tools' (TOOL_ENV) unless given.
 */
export function output(
  command: string,
  args: string[],
  signal: AbortSignal,
  env: NodeJS.ProcessEnv = TOOL_ENV,
): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawnTool(command, args, { signal, env, stdio: ['ignore', 'pipe', 'pipe'] });
    const stdout = bounded(child, OUTPUT_MAX);
    const stderr = tail(4096);
    child.stderr.on('data', stderr.add);
    rejectOnError(child, command, reject);
    child.on('close', (code, sig) => {
      if (code === 0 && !stdout.over()) return resolve(stdout.text());
      const said = stdout.over()
        ? `said more than ${OUTPUT_MAX} bytes`
        : lastLines(stderr.text()) || `exited ${code ?? sig}`;
      reject(new ToolError(`${command} failed: ${said}`, UNCHANGEABLE.test(said)));
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
