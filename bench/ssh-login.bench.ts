/**
 * `npm run bench:ssh-login [-- --keys 1000 --logins 100 --revocations 5]` (issue 31): SFTP logins to
 * an install through Hostplane's sshd with K keys registered on the platform, and revocation to
 * refusal. As root, with nginx, PHP-FPM, MariaDB, openssh-server and openssh-client (like
 * test/api/sftp.test.ts), on the test harness's database (the npm script: PostgreSQL at TEST_PG_URL,
 * a template of its own, `TEST_RUN_ID=sshbench`).
 *
 * 1. Login time: `sftp -b -` running `pwd` as `<install name>@127.0.0.1`, start to exit, p50/p90/p99
 *    over L logins one after another (goal p50 < 300 ms), interleaved with the same login to a bare
 *    sshd (the baseline: what this machine's sshd costs without Hostplane); beside it, the key lookup alone (the
 *    AuthorizedKeysCommand's curl to Hostplane's socket) and `ssh -V` (starting the client at all).
 * 2. Revocation: a session is open, the key is deleted through the API; the next login is refused
 *    (time from the DELETE's answer to a refused login) and the open session is ended (time to its
 *    end; goal < 10 s), R times.
 * Writes bench/results/ssh-login.{md,json}; everything it made is removed at the end.
 */
import { execFileSync, spawn } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import type { Sshd } from '../src/drivers/local/sshd.js';
import { dropTemplate, prepareTemplate } from '../test/support/databases.js';
import { factories } from '../test/support/factories.js';
import { buildTestApp } from '../test/support/harness.js';
import { readyWorld } from '../test/support/jobs.js';
import { localHosting } from '../test/support/local-hosting.js';
import { clientOptions, runTool, within } from '../test/support/ssh-client.js';
import { freePort, stopWebTier } from '../test/support/web-tier.js';

const { values: args } = parseArgs({
  options: {
    keys: { type: 'string', default: '1000' },
    logins: { type: 'string', default: '100' },
    revocations: { type: 'string', default: '5' },
  },
});
const KEYS = Number(args.keys);
const LOGINS = Number(args.logins);
const REVOCATIONS = Number(args.revocations);
const PER_USER = 50;
const PARENT = '/var/lib/hostplane-test';

const percentile = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? Number.NaN;
};
const ms = (x: number) => Math.round(x);
const summary = (xs: number[]) => ({
  n: xs.length,
  p50: ms(percentile(xs, 50)),
  p90: ms(percentile(xs, 90)),
  p99: ms(percentile(xs, 99)),
  max: ms(Math.max(...xs)),
});

/** An OpenSSH public key line of a fresh ed25519 key (no private file: a registered key only). */
function publicLine(comment: string): string {
  const raw = generateKeyPairSync('ed25519').publicKey.export({ type: 'spki', format: 'der' }).subarray(-32);
  const str = (b: Buffer) => Buffer.concat([Buffer.from([0, 0, 0, b.length]), b]);
  return `ssh-ed25519 ${Buffer.concat([str(Buffer.from('ssh-ed25519')), str(raw)]).toString('base64')} ${comment}`;
}

/**
 * A bare sshd on a free port: Debian's binary with a minimal configuration of its own (a host key, the
 * client's key in a key file for root, no PAM): what a login costs on this machine without Hostplane.
 */
async function bareSshd(dir: string, publicKeyFile: string) {
  const port = await freePort();
  const hostKey = path.join(dir, 'bare-host-key');
  execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', hostKey]);
  const keys = path.join(dir, 'bare-authorized-keys');
  await fs.copyFile(publicKeyFile, keys);
  const pidFile = path.join(dir, 'bare.pid');
  const config = path.join(dir, 'bare-sshd.conf');
  await fs.writeFile(
    config,
    [
      `Port ${port}`,
      'ListenAddress 127.0.0.1',
      `HostKey ${hostKey}`,
      `PidFile ${pidFile}`,
      `AuthorizedKeysFile ${keys}`,
      'StrictModes no',
      'UsePAM no',
      'PasswordAuthentication no',
      'KbdInteractiveAuthentication no',
      'Subsystem sftp internal-sftp',
      '',
    ].join('\n'),
  );
  await fs.mkdir('/run/sshd', { recursive: true, mode: 0o755 });
  execFileSync('/usr/sbin/sshd', ['-f', config, '-E', path.join(dir, 'bare-sshd.log')]);
  if (!(await within(10_000, async () => (await fs.stat(pidFile).catch(() => null)) !== null)))
    throw new Error('the bare sshd did not start');
  const pid = Number((await fs.readFile(pidFile, 'utf8')).trim());
  return { port, stop: () => process.kill(pid, 'SIGTERM') };
}

await fs.mkdir(PARENT, { recursive: true, mode: 0o755 });
// The harness's database: a template of this run's own (TEST_RUN_ID), dropped at the end.
await prepareTemplate();
const [httpPort, sshPort] = [await freePort(), await freePort()];
const host = await localHosting({ autoCleanup: false, parent: PARENT });
const t = await buildTestApp({
  env: {
    ...host.env,
    LOCAL_WEB: 'on',
    HOSTING_HTTP_PORT: String(httpPort),
    SSH_PORT: String(sshPort),
    SSH_ADDRESS: '127.0.0.1',
  },
});
const services = t.app.services;
const sshd = (services.driver as unknown as { sshd: Sshd }).sshd;
const keysDir = await fs.mkdtemp(path.join(os.tmpdir(), 'ssh-bench-'));
const f = factories(t);
let installId: string | null = null;
try {
  const w = await readyWorld(t, f);
  installId = w.install.id;
  await services.driver.start?.();
  await services.sshAccess?.start();
  const login = w.install.name;
  const keygen = (name: string) => {
    const file = path.join(keysDir, name);
    execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', file]);
    return file;
  };
  const register = async (client: typeof w.owner.client, line: string) => {
    const res = await client.post('/v1/ssh_keys', { public_key: line });
    if (res.status !== 201) throw new Error(JSON.stringify(res.body));
    return res.body.uuid as string;
  };
  // K keys on the platform: full users of the account, PER_USER keys each (the owner's among them).
  const seedStart = performance.now();
  const ownerKey = keygen('owner');
  await register(w.owner.client, (await fs.readFile(`${ownerKey}.pub`, 'utf8')).trim());
  for (let made = 1; made < KEYS; ) {
    const member = await f.user([{ account_id: w.account.id, roles: 'full' }]);
    const batch: Promise<string>[] = [];
    for (let i = 0; i < PER_USER && made < KEYS; i++, made++)
      batch.push(register(member.client, publicLine(`bench-${made}`)));
    await Promise.all(batch);
  }
  const seedSeconds = (performance.now() - seedStart) / 1000;

  const sftp = (key: string, port = sshPort, user = login) =>
    runTool('sftp', ['-b', '-', ...clientOptions(key), '-P', String(port), `${user}@127.0.0.1`], 'pwd\n');
  // The baseline, in the same run: the same sshd binary with nothing of Hostplane's (a key file, no
  // PAM, no chroot, no key command), logged in to by the same client, interleaved with ours so the
  // machine's load falls on both alike.
  const bare = await bareSshd(keysDir, `${ownerKey}.pub`);
  const logins: number[] = [];
  const bareLogins: number[] = [];
  try {
    for (let i = 0; i < LOGINS; i++) {
      const start = performance.now();
      const ran = await sftp(ownerKey);
      if (ran.code !== 0) throw new Error(`login ${i} failed: ${ran.stderr}`);
      logins.push(performance.now() - start);
      const bareStart = performance.now();
      const bareRan = await sftp(ownerKey, bare.port, 'root');
      if (bareRan.code !== 0) throw new Error(`bare login ${i} failed: ${bareRan.stderr}`);
      bareLogins.push(performance.now() - bareStart);
    }
  } finally {
    bare.stop();
  }
  // The key lookup alone, as sshd runs it (curl, the socket, one database round).
  const blob = (await fs.readFile(`${ownerKey}.pub`, 'utf8')).split(' ')[1] as string;
  const lookups: number[] = [];
  const uid = execFileSync('id', ['-u', login]).toString().trim();
  for (let i = 0; i < Math.min(LOGINS, 50); i++) {
    const start = performance.now();
    // Asynchronous: the socket's server is this process (a synchronous run would wait on itself).
    const { stdout: out } = await runTool('curl', [
      '-q',
      '-sf',
      '--max-time',
      '5',
      '--unix-socket',
      sshd.paths.socket,
      '--data-urlencode',
      `user=${login}`,
      '--data-urlencode',
      `uid=${uid}`,
      '--data-urlencode',
      'type=ssh-ed25519',
      '--data-urlencode',
      `key=${blob}`,
      'http://hostplane/ssh/keys',
    ]);
    if (!out.includes(blob)) throw new Error(`the lookup did not answer the key: ${out}`);
    lookups.push(performance.now() - start);
  }
  const client: number[] = [];
  for (let i = 0; i < 20; i++) {
    const start = performance.now();
    await runTool('ssh', ['-V']);
    client.push(performance.now() - start);
  }

  // Revocation: a session open, the key deleted; the next login refused, the session ended.
  const refusal: number[] = [];
  const ended: number[] = [];
  for (let r = 0; r < REVOCATIONS; r++) {
    const key = keygen(`revoked-${r}`);
    const member = await f.user([{ account_id: w.account.id, roles: 'full' }]);
    const uuid = await register(member.client, (await fs.readFile(`${key}.pub`, 'utf8')).trim());
    const child = spawn(
      'ssh',
      [...clientOptions(key), '-s', '-p', String(sshPort), `${login}@127.0.0.1`, 'sftp'],
      {
        stdio: ['pipe', 'pipe', 'ignore'],
        env: { PATH: '/usr/bin:/bin' },
      },
    );
    let out = Buffer.alloc(0);
    let exited = false;
    child.stdout.on('data', (c: Buffer) => {
      out = Buffer.concat([out, c]);
    });
    child.on('exit', () => {
      exited = true;
    });
    child.stdin.write(Buffer.from([0, 0, 0, 5, 1, 0, 0, 0, 3]));
    if (!(await within(15_000, () => out.length >= 5)) || exited) throw new Error('the session did not open');
    const res = await member.client.delete(`/v1/ssh_keys/${uuid}`);
    if (res.status !== 204) throw new Error(JSON.stringify(res.body));
    const start = performance.now();
    const refused = await sftp(key);
    if (refused.code === 0) throw new Error('a deleted key logged in');
    refusal.push(performance.now() - start);
    if (!(await within(30_000, () => exited))) throw new Error('the session was not ended in 30 s');
    ended.push(performance.now() - start);
    child.kill('SIGKILL');
  }

  const result = {
    keys: KEYS,
    seed_seconds: Math.round(seedSeconds),
    login_ms: summary(logins),
    bare_sshd_login_ms: summary(bareLogins),
    login_p50_ratio_to_bare: Math.round((percentile(logins, 50) / percentile(bareLogins, 50)) * 100) / 100,
    key_lookup_ms: summary(lookups),
    ssh_client_start_ms: summary(client),
    revocation_next_login_refused_ms: summary(refusal),
    revocation_session_ended_ms: summary(ended),
    cores: os.cpus().length,
    load: os.loadavg().map((x) => Math.round(x * 100) / 100),
  };
  const md = `# SSH login (issue 31), ${new Date().toISOString().slice(0, 10)}

${KEYS} keys registered (${Math.round(seedSeconds)} s to register), ${os.cpus().length} cores, load ${result.load.join(' ')}.
Login p50 against the bare sshd's p50 in the same run: ${result.login_p50_ratio_to_bare}x.

| measure | n | p50 ms | p90 ms | p99 ms | max ms |
| --- | --- | --- | --- | --- | --- |
${(
  [
    ['SFTP login (`sftp -b -` pwd, start to exit)', result.login_ms],
    ['the same login to a bare sshd (key file, no PAM, no chroot), interleaved', result.bare_sshd_login_ms],
    ['key lookup alone (curl to the socket)', result.key_lookup_ms],
    ['`ssh -V` (the client starting)', result.ssh_client_start_ms],
    ['key deleted -> next login refused (that login’s time)', result.revocation_next_login_refused_ms],
    ['key deleted -> open session ended', result.revocation_session_ended_ms],
  ] as const
)
  .map(([name, s]) => `| ${name} | ${s.n} | ${s.p50} | ${s.p90} | ${s.p99} | ${s.max} |`)
  .join('\n')}
`;
  await fs.mkdir(path.join('bench', 'results'), { recursive: true });
  await fs.writeFile(path.join('bench', 'results', 'ssh-login.json'), `${JSON.stringify(result, null, 2)}\n`);
  await fs.writeFile(path.join('bench', 'results', 'ssh-login.md'), md);
  console.log(md);
} finally {
  await services.sshAccess?.close();
  for (const session of await sshd.sessions()) await sshd.endSession(session);
  await sshd.stop();
  await stopWebTier(path.join(host.root, 'web'), installId ? [installId] : []);
  // A pool's workers may outlive the first userdel by a moment: once more after they are gone.
  await new Promise((r) => setTimeout(r, 2000));
  await stopWebTier(path.join(host.root, 'web'), installId ? [installId] : []);
  await t.close();
  await host.cleanup();
  await fs.rm(keysDir, { recursive: true, force: true });
  await dropTemplate();
}
