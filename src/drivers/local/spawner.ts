import { type ChildProcess, spawn } from 'node:child_process';
import { EventEmitter } from 'node:events';
import type { Socket } from 'node:net';
import { PassThrough } from 'node:stream';

/**
 * Decision #250: the local driver's tools are started by a small long-lived Node process of their
 * own (the spawner), not by the worker, agent or test process that asks for them.
 *
 * A fork copies the parent's page tables and write-protects its whole writable memory: every page
 * the parent writes afterwards takes a copy-on-write fault, even once the child has exec'd. A worker
 * holding a V8 heap of 100-300 MB pays that at its next collections, after every tool it starts; on
 * the virtual machines measured (bench/README.md, session 17) a fault costs ~15 µs, so one spawn cost
 * the worker up to a few hundred milliseconds of system time, and the driver starts hundreds of
 * tools per install. The spawner's heap is a few megabytes and it writes little of it, so its forks
 * are cheap, and the big process never forks.
 *
 * The spawner starts each tool with the options it is given (argument array, environment, cwd,
 * uid/gid, umask) and hands the tool's pipes to the asking process over its IPC channel (file
 * descriptors passed on a Unix socket), so a tool's bytes never pass through the spawner. What the
 * asking process gets behaves as a ChildProcess: stdio streams, `pid`, `exitCode`, `signalCode`,
 * `kill`, events `error`, `exit` and `close`, and the job's AbortSignal.
 *
 * Nothing here is application state: the spawner holds no configuration and no data, only the
 * process's tools in flight (like the process's own children). It starts at the first tool, does not
 * keep the process alive while no tool runs, ends with the process (its IPC channel closes), and is
 * started again if it dies; the tools it was running are then answered as failed.
 */

export type ToolStdio = 'pipe' | 'ignore';

export interface ToolOptions {
  env: NodeJS.ProcessEnv;
  cwd?: string;
  uid?: number;
  gid?: number;
  /** The tool's umask (default: the process's at the call). */
  umask?: number;
  signal?: AbortSignal;
  /** Sent on abort (SIGTERM by default, as Node's spawn). */
  killSignal?: NodeJS.Signals;
  stdio: [ToolStdio, ToolStdio, ToolStdio];
}

/** The spawner's code: CommonJS run by `node -e`, so the file-by-file tree and the bundle start the same. */
const SPAWNER = `
'use strict';
const { spawn } = require('node:child_process');
const tools = new Map();
const send = (message, handle) => { try { process.send(message, handle); } catch {} };
process.on('disconnect', () => process.exit(0));
process.on('message', (m) => {
  if (m.op === 'kill') { const tool = tools.get(m.id); if (tool) tool.kill(m.signal); return; }
  if (m.op !== 'spawn') return;
  let tool;
  const previous = m.umask == null ? null : process.umask(m.umask);
  try {
    tool = spawn(m.command, m.args, { env: m.env, cwd: m.cwd, uid: m.uid, gid: m.gid, stdio: m.stdio });
  } catch (err) {
    send({ op: 'error', id: m.id, code: err.code, message: err.message });
    return;
  } finally {
    if (previous !== null) process.umask(previous);
  }
  tool.on('error', (err) => send({ op: 'error', id: m.id, code: err.code, message: err.message }));
  if (tool.pid === undefined) return;
  tools.set(m.id, tool);
  const pipes = [tool.stdin, tool.stdout, tool.stderr];
  // Not one byte is read here: the pipes go to the asking process as they are. Node's own end of a
  // child (its stdin destroyed, its output read to the end) must not reach them either: a tool can
  // end before its pipes' turn to be sent (one handle at a time, each acknowledged).
  for (const pipe of pipes.slice(1)) if (pipe) { pipe._handle.reading = false; pipe._handle.readStop(); }
  tool.stdin = tool.stdout = tool.stderr = null;
  tool.stdio.fill(null);
  send({ op: 'spawned', id: m.id, pid: tool.pid });
  pipes.forEach((pipe, fd) => { if (pipe) send({ op: 'pipe', id: m.id, fd }, pipe); });
  tool.on('exit', (code, signal) => { tools.delete(m.id); send({ op: 'exit', id: m.id, code, signal }); });
});
`;

type SpawnerMessage =
  | { op: 'spawned'; id: number; pid: number }
  | { op: 'pipe'; id: number; fd: 0 | 1 | 2 }
  | { op: 'error'; id: number; code?: string; message: string }
  | { op: 'exit'; id: number; code: number | null; signal: NodeJS.Signals | null };

/** A tool started by the spawner, as the asking process sees it (the parts of ChildProcess the driver uses). */
export class Tool extends EventEmitter {
  /** Each stream is there whatever the stdio asked; one asked as 'ignore' is ended and empty. */
  readonly stdin: PassThrough;
  readonly stdout: PassThrough;
  readonly stderr: PassThrough;
  pid: number | undefined = undefined;
  exitCode: number | null = null;
  signalCode: NodeJS.Signals | null = null;
  /** Pipes asked for that have not closed yet (stdin: its socket; stdout, stderr: their streams). */
  private openPipes: number;
  private exited = false;
  private closed = false;
  private failed = false;
  /** An abort heard before the spawner said the tool started: answered once it has (a pid to wait on). */
  private pendingAbort: Error | null = null;

  constructor(
    private readonly id: number,
    private readonly host: Spawner,
    stdio: [ToolStdio, ToolStdio, ToolStdio],
  ) {
    super();
    const pipe = (i: number) => {
      const stream = new PassThrough();
      if (stdio[i] === 'ignore') stream.end();
      else if (i > 0) stream.once('close', () => this.pipeClosed());
      return stream;
    };
    this.stdin = pipe(0);
    this.stdout = pipe(1);
    this.stderr = pipe(2);
    this.openPipes = stdio.filter((s) => s === 'pipe').length;
  }

  /** Sends `signal` to the tool (the spawner has it, started or about to be: messages keep their order). */
  kill(signal: NodeJS.Signals = 'SIGTERM'): boolean {
    if (this.exited || this.failed) return false;
    this.host.kill(this.id, signal);
    return true;
  }

  /** The job's signal: the tool killed, then 'error' (an AbortError) as Node's spawn answers an abort. */
  abort(reason: unknown, signal: NodeJS.Signals) {
    this.kill(signal);
    const err = Object.assign(new Error('The operation was aborted', { cause: reason }), {
      name: 'AbortError',
      code: 'ABORT_ERR',
    });
    if (this.pid === undefined && !this.failed) this.pendingAbort = err;
    else this.emit('error', err);
  }

  /** @internal a message of the spawner about this tool. */
  receive(message: SpawnerMessage, handle: Socket | undefined) {
    if (message.op === 'spawned') {
      this.pid = message.pid;
      if (this.pendingAbort) this.emit('error', this.pendingAbort);
      this.pendingAbort = null;
    } else if (message.op === 'pipe') {
      if (handle) this.attach(message.fd, handle);
      // A pipe that came without its descriptor (closed in the spawner first): ended, never waited on.
      else if (message.fd === 0) this.pipeClosed();
      else (message.fd === 1 ? this.stdout : this.stderr).end();
    } else if (message.op === 'error')
      this.fail(Object.assign(new Error(message.message), { code: message.code }));
    else if (message.op === 'exit') this.exit(message.code, message.signal);
  }

  private attach(fd: 0 | 1 | 2, socket: Socket) {
    if (fd === 0) {
      const stdin = this.stdin;
      // As Node's child stdin: a tool that stopped reading makes writes fail (EPIPE) on the stream.
      socket.on('error', (err) => stdin.destroy(err));
      // Its read side only tells when the tool closed its end.
      socket.resume();
      socket.once('close', () => this.pipeClosed());
      stdin.pipe(socket);
      // Destroyed rather than ended (a caller giving up): the tool's stdin is closed too.
      stdin.once('close', () => {
        if (!socket.writableEnded) socket.destroy();
      });
      return;
    }
    const stream = fd === 1 ? this.stdout : this.stderr;
    socket.on('error', (err) => stream.destroy(err));
    socket.pipe(stream);
  }

  private pipeClosed() {
    this.openPipes -= 1;
    this.maybeClose();
  }

  /** The spawn failed (no pid) or the spawner is gone: answered as Node answers a failed spawn. */
  fail(err: Error) {
    if (this.failed || this.exited) return;
    const started = this.pid !== undefined;
    const gone = this.host.gone(this.id);
    if (!started || gone) {
      this.failed = true;
      this.pendingAbort = null;
    }
    this.emit('error', err);
    if (!this.failed) return;
    // No tool (or nothing more to hear of it): its streams end, as a failed spawn's do.
    for (const stream of [this.stdin, this.stdout, this.stderr]) stream.destroy();
    this.openPipes = 0;
    if (started) this.exit(null, 'SIGKILL');
    else this.host.done(this.id);
  }

  /** @internal */
  exit(code: number | null, signal: NodeJS.Signals | null) {
    if (this.exited) return;
    this.exited = true;
    this.exitCode = code;
    this.signalCode = signal;
    this.emit('exit', code, signal);
    // As Node's flushStdio: output nobody listens to is read to its end, so 'close' still comes.
    for (const stream of [this.stdout, this.stderr]) if (stream.readableFlowing === null) stream.resume();
    this.maybeClose();
  }

  private maybeClose() {
    if (this.closed || !this.exited || this.openPipes > 0) return;
    this.closed = true;
    this.host.done(this.id);
    this.emit('close', this.exitCode, this.signalCode);
  }
}

/** The process's spawner: one per process, started at its first tool, again after it died. */
class Spawner {
  private process: ChildProcess | null = null;
  private readonly tools = new Map<number, Tool>();
  private next = 1;
  /** Ends the spawner and waits (at most `ms`) for it to exit, so that this process reaps it. */
  end(ms: number): Promise<void> {
    const child = this.process;
    if (!child) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      child.once('exit', () => {
        clearTimeout(timer);
        resolve();
      });
      if (child.connected) child.disconnect();
    });
  }

  spawn(command: string, args: string[], options: ToolOptions): Tool {
    const id = this.next++;
    const tool = new Tool(id, this, options.stdio);
    const child = this.started();
    this.tools.set(id, tool);
    child.channel?.ref();
    const { signal } = options;
    child.send(
      {
        op: 'spawn',
        id,
        command,
        args,
        env: options.env,
        cwd: options.cwd,
        uid: options.uid,
        gid: options.gid,
        umask: options.umask ?? currentUmask(),
        stdio: options.stdio,
      },
      (err) => {
        if (err) tool.fail(new Error(`the tool spawner is gone: ${err.message}`));
      },
    );
    if (signal) {
      const onAbort = () => tool.abort(signal.reason, options.killSignal ?? 'SIGTERM');
      if (signal.aborted) process.nextTick(onAbort);
      else {
        signal.addEventListener('abort', onAbort, { once: true });
        tool.once('exit', () => signal.removeEventListener('abort', onAbort));
      }
    }
    return tool;
  }

  kill(id: number, signal: NodeJS.Signals) {
    this.process?.send({ op: 'kill', id, signal });
  }

  /** A tool's last word was heard: the spawner no longer keeps the process alive for it. */
  done(id: number) {
    this.tools.delete(id);
    if (this.tools.size === 0) this.process?.channel?.unref();
  }

  /** Whether the spawner that ran the tool `id` is gone (nothing more will be heard of it). */
  gone(id: number) {
    return !this.tools.has(id) || this.process === null;
  }

  private started(): ChildProcess {
    if (this.process) return this.process;
    // Its own small heap (a fork copies the page tables of what it maps); no flag or loader of ours.
    const child = spawn(
      process.execPath,
      ['--max-semi-space-size=1', '--max-old-space-size=64', '-e', SPAWNER],
      {
        stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
        env: {},
      },
    );
    child.on('message', (message: SpawnerMessage, handle: Socket | undefined) => {
      this.tools.get(message.id)?.receive(message, handle);
    });
    child.on('error', () => {});
    child.once('exit', () => {
      if (this.process !== child) return;
      this.process = null;
      const orphans = [...this.tools.values()];
      this.tools.clear();
      for (const tool of orphans) tool.fail(new Error('the tool spawner ended while the tool ran'));
    });
    child.channel?.unref();
    child.unref();
    this.process = child;
    return child;
  }
}

/** The process's umask now (the tool gets it, as a tool forked from here would). */
function currentUmask(): number {
  const mask = process.umask(0o022);
  process.umask(mask);
  return mask;
}

const spawner = new Spawner();

/**
 * Ends the process's spawner, waiting for it (at most `ms`): a process that ends through here reaps
 * it, so its and its tools' CPU count in the process's own children's (a `serve`, `worker` or `agent`
 * stopping; one that ends without it leaves the spawner to end alone as its channel closes).
 */
export function endSpawner(ms = 5000): Promise<void> {
  return spawner.end(ms);
}

/** Starts `command` (no shell) through the process's spawner: a ChildProcess-like {@link Tool}. */
export function spawnTool(command: string, args: string[], options: ToolOptions): Tool {
  return spawner.spawn(command, args, options);
}
