import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';

export type ServerKind = 'hello' | 'raw' | 'app' | 'bytes';

/** A server under test, in its own process (bench/server.ts). */
export interface Server {
  kind: ServerKind;
  url: string;
  path: string;
  pid: number;
  stop(): Promise<void>;
}

/** What one load run saw: every latency, for percentiles over several runs. */
export interface Run {
  seconds: number;
  latenciesMs: number[];
  errors: number;
  timeouts: number;
  non2xx: number;
  /** 2xx answers per 1-second window from the start of the run (issue 20: throughput over time). */
  perSecond: number[];
}

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const START_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 10_000;
// Linux reports process CPU time in clock ticks of USER_HZ, which is 100 on every mainstream arch.
const USER_HZ = 100;

/** Starts `bench/server.ts <kind>` and resolves once it printed its port. */
export function startServer(
  kind: ServerKind,
  env: Record<string, string>,
  args: string[],
  options: { root?: string; nodeArgs?: string[] } = {},
): Promise<Server> {
  // BENCH_CPU_PROF=dir: each server writes a V8 CPU profile there when it stops (bench/README.md).
  const profile = process.env.BENCH_CPU_PROF
    ? ['--cpu-prof', '--cpu-prof-dir', process.env.BENCH_CPU_PROF]
    : [];
  // `root`: another checkout's bench/server.ts (its own src/), to compare two trees in one run.
  const nodeArgs = [...profile, ...(options.nodeArgs ?? []), '--import', 'tsx', 'bench/server.ts'];
  const child = spawn(process.execPath, [...nodeArgs, kind, ...args], {
    cwd: options.root ?? ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return new Promise((resolve, reject) => {
    let out = '';
    const fail = (why: string) => {
      clearTimeout(timer);
      child.kill('SIGKILL');
      reject(new Error(`server ${kind}: ${why}`));
    };
    const timer = setTimeout(() => fail(`not ready after ${START_TIMEOUT_MS} ms`), START_TIMEOUT_MS);
    child.once('exit', (code) => fail(`exited with ${code} before it was ready`));
    child.stdout?.on('data', (chunk: Buffer) => {
      out += chunk.toString('utf8');
      // The server's ready line; at LOG_LEVEL=info, pino's lines come before it on the same stdout.
      const line = out
        .split('\n')
        .slice(0, -1)
        .find((l) => /^\{"port":\d+,"path":/.test(l));
      if (line === undefined) {
        out = out.slice(out.lastIndexOf('\n') + 1);
        return;
      }
      clearTimeout(timer);
      child.removeAllListeners('exit');
      // Later output (log lines at LOG_LEVEL=info) is read and dropped, never accumulated here.
      child.stdout?.removeAllListeners('data');
      child.stdout?.resume();
      const ready = JSON.parse(line) as { port: number; path: string };
      resolve({
        kind,
        url: `http://127.0.0.1:${ready.port}${ready.path}`,
        path: ready.path,
        pid: child.pid ?? 0,
        stop: () => stopServer(child),
      });
    });
  });
}

/** A process of the compiled CLI (`node dist/cli.js ...`). */
export interface CliProcess {
  pid: number;
  /** The first match of the `ready` pattern. */
  ready: RegExpMatchArray;
  /** Everything it wrote so far (stdout and stderr). */
  output(): string;
  stop(): Promise<void>;
}

/**
 * Starts `node dist/cli.js <args>` (no tsx in the process), or another `script` of the build such as
 * `bin/hostplane.js` (what `npm start` runs: the bundle), with only PATH and `env`, and resolves once
 * its output matches `ready`. Build first: {@link assertBuilt}.
 */
export function startCli(
  args: string[],
  env: Record<string, string>,
  ready: RegExp,
  script = 'dist/cli.js',
): Promise<CliProcess> {
  const child = spawn(process.execPath, [script, ...args], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  return new Promise((resolve, reject) => {
    let resolved = false;
    const fail = (why: string) => {
      clearTimeout(timer);
      child.kill('SIGKILL');
      reject(new Error(`hostplane ${args.join(' ')}: ${why}; output:\n${out.slice(-3000)}`));
    };
    const timer = setTimeout(() => fail(`not ready after ${START_TIMEOUT_MS} ms`), START_TIMEOUT_MS);
    child.once('exit', (code) => resolved || fail(`exited with ${code} before it was ready`));
    const onData = (chunk: Buffer) => {
      out += chunk.toString('utf8');
      const match = resolved ? null : ready.exec(out);
      if (!match) return;
      resolved = true;
      clearTimeout(timer);
      resolve({ pid: child.pid ?? 0, ready: match, output: () => out, stop: () => stopServer(child) });
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
  });
}

/** Throws unless dist/ was built after the last change under src/ (`npm run build`). */
export function assertBuilt(): void {
  const stamp = path.join(ROOT, 'dist', '.build-stamp');
  const built = fs.existsSync(stamp) ? fs.statSync(stamp).mtimeMs : 0;
  const src = path.join(ROOT, 'src');
  const stale = (fs.readdirSync(src, { recursive: true }) as string[]).find(
    (file) => fs.statSync(path.join(src, file)).mtimeMs > built,
  );
  if (built === 0 || stale) {
    throw new Error(`dist/ is older than src/${stale ?? ''}: run \`npm run build\` first`);
  }
}

function stopServer(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), STOP_TIMEOUT_MS);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill('SIGTERM');
  });
}

/**
 * One request outside any load run: must be a 200 whose body passes `check` (which returns a
 * problem, or null). Returns the size of the body.
 */
export async function verify(
  url: string,
  headers: Record<string, string>,
  check: (body: unknown) => string | null,
): Promise<number> {
  const res = await fetch(url, { headers, signal: AbortSignal.timeout(10_000) });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`${url}: expected 200, got ${res.status}: ${text.slice(0, 300)}`);
  const problem = check(JSON.parse(text));
  if (problem) throw new Error(`${url}: wrong response: ${problem}`);
  return Buffer.byteLength(text);
}

/** User + system CPU seconds of a process so far, from /proc; null where there is no /proc. */
export function cpuSeconds(pid: number): number | null {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may contain spaces): state is field 3, utime 14, stime 15.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / USER_HZ;
  } catch {
    return null;
  }
}

/** Resident memory of a process now, in MB, from /proc; 0 where there is none. */
export function rssMb(pid: number): number {
  try {
    const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024;
  } catch {
    return 0;
  }
}

/**
 * `connections` keep-alive connections for `seconds`, recording the latency of every response.
 * GETs of `url` unless `requests` is given: autocannon's sequence each connection sends in a loop
 * (method, body, `setupRequest`/`onResponse` to carry an id from one request to the next).
 */
export function run(
  url: string,
  headers: Record<string, string>,
  seconds: number,
  connections: number,
  requests?: autocannon.Request[],
) {
  return new Promise<Run>((resolve, reject) => {
    const latenciesMs: number[] = [];
    const perSecond: number[] = [];
    const start = performance.now();
    const options = { url, headers, connections, duration: seconds, ...(requests && { requests }) };
    const instance = autocannon(options, (err, result) => {
      if (err) reject(err);
      else
        resolve({
          seconds: result.duration,
          latenciesMs,
          errors: result.errors,
          timeouts: result.timeouts,
          non2xx: result.non2xx,
          perSecond: Array.from({ length: Math.ceil(seconds) }, (_, i) => perSecond[i] ?? 0),
        });
    });
    instance.on('response', (_client, status, _bytes, responseTime) => {
      latenciesMs.push(responseTime);
      if (status < 200 || status > 299) return;
      const window = Math.floor((performance.now() - start) / 1000);
      perSecond[window] = (perSecond[window] ?? 0) + 1;
    });
  });
}

/** The value below which `q` (0-1) of the sorted values lie (nearest rank). */
export function percentile(sorted: ArrayLike<number>, q: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] ?? Number.NaN;
}

/** A port free on 127.0.0.1 now (for a child process that must be told its port). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
    server.on('error', reject);
  });
}
