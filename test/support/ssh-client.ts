// What the SSH test files (issue 31: sftp, ssh-shell) share: Debian's openssh-client in batch mode
// against Hostplane's sshd, and a poll with a deadline.
import { execFile, spawn } from 'node:child_process';
import net from 'node:net';

/** What a client run printed and how it ended. */
export interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

export function runTool(command: string, args: string[], stdin = '', timeoutMs = 30_000): Promise<Ran> {
  return new Promise((resolve) => {
    const child = execFile(
      command,
      args,
      { timeout: timeoutMs, env: { PATH: '/usr/bin:/bin' }, maxBuffer: 4 << 20 },
      (err, stdout, stderr) =>
        resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr }),
    );
    child.stdin?.end(stdin);
  });
}

/** Polls `check` until it holds or the deadline passes; answers whether it held. */
export async function within(ms: number, check: () => Promise<boolean> | boolean): Promise<boolean> {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await check()) return true;
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The options of every client run: this key only, no agent, no known_hosts, no prompt. */
export const clientOptions = (key: string) => [
  '-o',
  'StrictHostKeyChecking=no',
  '-o',
  'UserKnownHostsFile=/dev/null',
  '-o',
  'BatchMode=yes',
  '-o',
  'IdentitiesOnly=yes',
  '-o',
  'IdentityAgent=none',
  '-o',
  'LogLevel=ERROR',
  '-i',
  key,
];

/** A client of the sshd on `port` at 127.0.0.1. */
export function sshClient(port: number) {
  return {
    /** `sftp -b -` with `commands` as the batch: exit 0 only when every command worked. */
    sftp: (key: string, login: string, commands: string) =>
      runTool('sftp', ['-b', '-', ...clientOptions(key), '-P', String(port), `${login}@127.0.0.1`], commands),
    /** `ssh login args…` (stdin given to the remote command). */
    ssh: (key: string, login: string, args: string[], extra: string[] = [], stdin = '') =>
      runTool(
        'ssh',
        [...clientOptions(key), ...extra, '-p', String(port), `${login}@127.0.0.1`, ...args],
        stdin,
      ),
    /**
     * `ssh -N -L local:127.0.0.1:target`: what a connection to the local end receives within 5 s
     * (nothing when the server refuses the forward).
     */
    async throughForward(key: string, login: string, localPort: number, targetPort: number): Promise<string> {
      const forward = spawn(
        'ssh',
        [
          ...clientOptions(key),
          '-N',
          '-L',
          `${localPort}:127.0.0.1:${targetPort}`,
          '-p',
          String(port),
          `${login}@127.0.0.1`,
        ],
        { stdio: 'ignore', env: { PATH: '/usr/bin:/bin' } },
      );
      try {
        const listening = await within(
          15_000,
          () =>
            new Promise<boolean>((resolve) => {
              const s = net.connect(localPort, '127.0.0.1');
              s.on('connect', () => {
                s.destroy();
                resolve(true);
              });
              s.on('error', () => resolve(false));
            }),
        );
        if (!listening) return '';
        return await new Promise<string>((resolve) => {
          let data = '';
          const s = net.connect(localPort, '127.0.0.1');
          s.on('data', (c) => {
            data += c.toString('latin1');
          });
          s.on('close', () => resolve(data));
          s.on('error', () => resolve(data));
          setTimeout(() => s.destroy(), 5000);
        });
      } finally {
        forward.kill('SIGKILL');
      }
    },
  };
}
