import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { spawnTool, type Tool } from './spawner.js';

const ENV = { PATH: '/usr/bin:/bin' };

/** Runs a tool to its end: its exit code, signal, stdout and stderr. */
async function finish(tool: Tool, input?: Buffer | string) {
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  tool.stdout.on('data', (chunk: Buffer) => out.push(chunk));
  tool.stderr.on('data', (chunk: Buffer) => err.push(chunk));
  if (input !== undefined) tool.stdin.end(input);
  // Not events.once: an 'error' (an abort) is no end; 'close' is.
  const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) =>
    tool.once('close', (...args) => resolve(args as [number | null, NodeJS.Signals | null])),
  );
  return { code, signal, stdout: Buffer.concat(out), stderr: Buffer.concat(err).toString() };
}

const pipes = ['pipe', 'pipe', 'pipe'] as const;

/** Runs `body` in a new node process with spawnTool, endSpawner and fs in scope: its exit code and stdout. */
async function script(body: string) {
  const self = fileURLToPath(new URL(import.meta.url));
  const module = self.replace(/spawner\.test\.(ts|js)$/, 'spawner.$1');
  const loader = module.endsWith('.ts') ? ['--import', 'tsx'] : [];
  const child = spawn(
    process.execPath,
    [
      ...loader,
      '--input-type=module',
      '-e',
      `import fs from 'node:fs';
       const { spawnTool, endSpawner } = await import(${JSON.stringify(module)});
       ${body}`,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  let said = '';
  child.stdout.on('data', (chunk: Buffer) => {
    said += chunk.toString();
  });
  const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
  const [code] = (await once(child, 'exit')) as [number | null];
  clearTimeout(timer);
  return { code, said };
}

describe('the tool spawner (decision 250: tools are not forked from the worker)', () => {
  it('a tool is the spawner’s child, not this process’s; its stdin, stdout and stderr reach this process whole', async () => {
    const parent = await finish(spawnTool('/bin/sh', ['-c', 'echo $PPID'], { env: ENV, stdio: [...pipes] }));
    assert.equal(parent.code, 0);
    assert.notEqual(Number(parent.stdout.toString().trim()), process.pid);

    // 5 MB out and 3 MB in, both larger than any pipe's buffer: nothing is read by the spawner on the way.
    const big = await finish(
      spawnTool('/bin/sh', ['-c', 'head -c 5000000 /dev/zero; echo said >&2; exit 3'], {
        env: ENV,
        stdio: [...pipes],
      }),
    );
    assert.deepEqual([big.code, big.stdout.length, big.stderr], [3, 5_000_000, 'said\n']);
    const input = Buffer.alloc(3_000_000, 7);
    const echoed = await finish(spawnTool('cat', [], { env: ENV, stdio: [...pipes] }), input);
    assert.equal(echoed.code, 0);
    assert.ok(echoed.stdout.equals(input));
  });

  it('tools that end before their pipes are handed over still hand them over: 200 at once, each closes with its output', async () => {
    const ends = await Promise.all(
      Array.from({ length: 200 }, (_, i) =>
        finish(spawnTool('/bin/sh', ['-c', `echo ${i}`], { env: ENV, stdio: [...pipes] })),
      ),
    );
    assert.deepEqual(
      ends.map((e) => e.stdout.toString().trim()),
      Array.from({ length: 200 }, (_, i) => String(i)),
    );
  });

  it('the options reach the tool: environment, cwd, uid and gid, umask', async () => {
    const said = await finish(
      spawnTool('/bin/sh', ['-c', 'echo "$HP_X $(pwd) $(id -u) $(id -g) $(umask)"'], {
        env: { ...ENV, HP_X: 'x' },
        cwd: '/tmp',
        uid: 65534,
        gid: 65534,
        umask: 0o027,
        stdio: ['ignore', 'pipe', 'pipe'],
      }),
    );
    assert.equal(said.stdout.toString().trim(), 'x /tmp 65534 65534 0027');
  });

  it('a tool not installed fails as a spawn does (ENOENT, no pid); the next tool runs', async () => {
    const tool = spawnTool('hostplane-no-such-tool', [], { env: ENV, stdio: [...pipes] });
    const [err] = (await once(tool, 'error')) as [NodeJS.ErrnoException];
    assert.equal(err.code, 'ENOENT');
    assert.equal(tool.pid, undefined);
    assert.equal((await finish(spawnTool('true', [], { env: ENV, stdio: [...pipes] }))).code, 0);
  });

  it('the job’s signal kills the tool (killSignal), answers an AbortError, then close once it has exited, even when aborted at once', async () => {
    for (const wait of [0, 200]) {
      const controller = new AbortController();
      const tool = spawnTool('sleep', ['30'], {
        env: ENV,
        signal: controller.signal,
        killSignal: 'SIGKILL',
        stdio: [...pipes],
      });
      const errored = once(tool, 'error');
      const closed = finish(tool);
      if (wait) await sleep(wait);
      controller.abort();
      const [err] = (await errored) as [Error & { code?: string }];
      assert.equal(err.name, 'AbortError');
      assert.equal(tool.exitCode, null);
      assert.ok(tool.pid, 'the error comes once the tool has a pid to wait on');
      const { signal } = await closed;
      assert.equal(signal, 'SIGKILL');
    }
  });

  it('close waits for the output to be read (a slow reader gets every byte)', async () => {
    const tool = spawnTool('/bin/sh', ['-c', 'head -c 1000000 /dev/zero'], { env: ENV, stdio: [...pipes] });
    let closed = false;
    tool.once('close', () => {
      closed = true;
    });
    let bytes = 0;
    await sleep(300);
    for await (const chunk of tool.stdout) {
      assert.equal(closed, false);
      bytes += (chunk as Buffer).length;
      await sleep(1);
    }
    await new Promise((resolve) => (closed ? resolve(null) : tool.once('close', resolve)));
    assert.equal(bytes, 1_000_000);
  });

  it('a spawner killed under a running tool: the tool is answered as failed, and the next tool starts a new spawner', async () => {
    const first = await finish(spawnTool('/bin/sh', ['-c', 'echo $PPID'], { env: ENV, stdio: [...pipes] }));
    const spawnerPid = Number(first.stdout.toString().trim());
    const running = spawnTool('sleep', ['30'], { env: ENV, stdio: [...pipes] });
    const errored = once(running, 'error');
    const closed = finish(running);
    await sleep(200);
    process.kill(spawnerPid, 'SIGKILL');
    const [err] = (await errored) as [Error];
    assert.match(err.message, /spawner ended/);
    assert.equal((await closed).signal, 'SIGKILL');
    const next = await finish(spawnTool('/bin/sh', ['-c', 'echo $PPID'], { env: ENV, stdio: [...pipes] }));
    assert.notEqual(Number(next.stdout.toString().trim()), spawnerPid);
    // The orphaned sleep (its spawner is gone) is ended by its pid.
    if (running.pid) process.kill(running.pid, 'SIGKILL');
  });

  it('the spawner keeps no process alive: a process that ran a tool ends by itself', async () => {
    const { code, said } = await script(
      `const tool = spawnTool('true', [], { env: { PATH: '/usr/bin:/bin' }, stdio: ['pipe', 'pipe', 'pipe'] });
       tool.on('close', (code) => console.log('closed', code));`,
    );
    assert.equal(said.trim(), 'closed 0');
    assert.equal(code, 0, 'the process ended by itself');
  });

  it('endSpawner: a process that stops through it reaps its spawner, so its tools’ CPU counts in its children’s', async () => {
    const { code, said } = await script(
      `await new Promise((resolve) => {
         const tool = spawnTool('/bin/sh', ['-c', 'head -c 400000000 /dev/zero | md5sum'], { env: { PATH: '/usr/bin:/bin' }, stdio: ['ignore', 'pipe', 'pipe'] });
         tool.stdout.resume();
         tool.on('close', resolve);
       });
       const cutime = () => { const f = fs.readFileSync('/proc/self/stat', 'utf8').split(') ')[1].split(' '); return (Number(f[13]) + Number(f[14])) / 100; };
       const before = cutime();
       await endSpawner();
       console.log(before, cutime());`,
    );
    assert.equal(code, 0);
    const [before, after] = said.trim().split(' ').map(Number) as [number, number];
    assert.equal(before, 0, 'the tools were not this process’s children');
    assert.ok(after > 0.1, `the reaped spawner's tools counted: ${after} CPU-s`);
  });
});
