import { type ChildProcess, spawn } from 'node:child_process';

export interface Running {
  child: ChildProcess;
  output(): string;
  /** Resolves with the first match of `pattern` in stdout+stderr, or rejects after `ms`. */
  waitFor(pattern: RegExp, ms?: number): Promise<RegExpMatchArray>;
  /** The exit code, or the signal name when killed by one; once its output is read (at most 1 s later). */
  exited: Promise<number | string | null>;
}

/**
 * Runs `hostplane <args>` with the given environment, as `npm start` does: the compiled CLI
 * (scripts/test.sh builds it first when the sources changed), which starts in a fraction of the time
 * that compiling the sources with tsx in every child process takes on a loaded machine.
 */
export function runCli(
  args: string[],
  env: Record<string, string>,
  /**
   * The bundle `npm start` runs (bin/hostplane.js starts it; issue 20): ~0.35 CPU-s a start, where the
   * file-by-file tree (dist/cli.js, ~960 modules) took ~1.2 on a loaded machine, in every CLI command,
   * server, worker and agent a test starts (the suite's budget, issue 29 defect 6).
   */
  entry = 'dist/bundle/cli.js',
  /** A command to run it under, e.g. `ip netns exec NAME` (issue 30's hosting servers). */
  prefix: string[] = [],
): Running {
  const [command = process.execPath, ...before] = [...prefix, process.execPath];
  // e.g. TEST_CHILD_NODE_ARGS="--cpu-prof --cpu-prof-dir=.tmp/prof": a profile of every CLI process.
  const nodeArgs = (process.env.TEST_CHILD_NODE_ARGS ?? '').split(' ').filter(Boolean);
  const child = spawn(command, [...before, ...nodeArgs, entry, ...args], {
    env: { PATH: process.env.PATH ?? '', LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let text = '';
  const listeners = new Set<() => void>();
  const onData = (chunk: Buffer) => {
    text += chunk.toString();
    for (const l of listeners) l();
  };
  child.stdout?.on('data', onData);
  child.stderr?.on('data', onData);
  // Answered once its output is read too: 'exit' can come before the last lines in the pipes, and a
  // test that reads output() after `exited` must see them. A daemon it started may keep the pipes
  // open (nginx, PHP-FPM): then a second after the exit.
  const exited = new Promise<number | string | null>((resolve) =>
    child.on('exit', (code, signal) => {
      const finish = () => resolve(code ?? signal);
      child.once('close', finish);
      setTimeout(finish, 1000).unref();
    }),
  );
  return {
    child,
    output: () => text,
    exited,
    waitFor: (pattern, ms = 60_000) =>
      new Promise((resolve, reject) => {
        const check = () => {
          const match = text.match(pattern);
          if (match) {
            listeners.delete(check);
            clearTimeout(timer);
            resolve(match);
          }
        };
        const timer = setTimeout(() => {
          listeners.delete(check);
          reject(new Error(`timed out waiting for ${pattern}; output so far:\n${text}`));
        }, ms);
        listeners.add(check);
        void exited.then(() => {
          setTimeout(() => {
            if (listeners.has(check)) {
              listeners.delete(check);
              clearTimeout(timer);
              reject(new Error(`process exited before ${pattern}; output:\n${text}`));
            }
          }, 50);
        });
        check();
      }),
  };
}
