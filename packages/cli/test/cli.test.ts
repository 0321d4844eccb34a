// hostplane-cli against a real Hostplane (bin/hostplane.js serve on PGlite, temp DATA_DIR), run as a
// user runs it: the built bin in a child process, credentials from the environment or a profile file.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { b64, createPki } from '../../../test/support/pki.js';
import {
  ATTEMPTS_PER_STEP,
  type Hostplane,
  REPO_ROOT,
  startHostplane,
  TEST_SERVER_ENV,
} from '../../client/scripts/serve.js';
import { EXIT } from '../src/exit-codes.js';
import { run } from '../src/main.js';
import { buildProgram } from '../src/program.js';

const BIN = path.join(REPO_ROOT, 'packages/cli/bin/hostplane-cli.js');
const home = fs.mkdtempSync(path.join(os.tmpdir(), 'hostplane-cli-home-'));
let server: Hostplane;

before(async () => {
  server = await startHostplane(TEST_SERVER_ENV);
});
after(async () => {
  await server?.stop();
  fs.rmSync(home, { recursive: true, force: true });
});

interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs hostplane-cli; by default with the demo credential in HOSTPLANE_URL/USERNAME/PASSWORD. */
function cli(args: string[], env: Record<string, string> | null = null): Promise<Result> {
  const credentials = {
    HOSTPLANE_URL: server.url,
    HOSTPLANE_USERNAME: server.demo.username,
    HOSTPLANE_PASSWORD: server.demo.password,
  };
  const child = spawn(process.execPath, [BIN, ...args], {
    env: { PATH: process.env.PATH ?? '', HOME: home, ...(env ?? credentials) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => {
    stdout += c.toString();
  });
  child.stderr.on('data', (c: Buffer) => {
    stderr += c.toString();
  });
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
}

async function ok(args: string[]) {
  const r = await cli(args);
  assert.equal(r.code, 0, `hostplane-cli ${args.join(' ')}: ${r.stderr}`);
  return r;
}

async function json(args: string[]) {
  return JSON.parse((await ok([...args, '--json'])).stdout);
}

async function admin(pathname: string, body: unknown, method = 'POST') {
  const res = await fetch(`${server.url}${pathname}`, {
    method,
    headers: { authorization: `Bearer ${server.adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  assert.ok(res.ok, `${pathname}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

/** An active install of the demo account, created (and its provisioning followed) with the CLI. */
async function activeInstall() {
  const name = `c${randomUUID().replaceAll('-', '').slice(0, 10)}`;
  const site = await json(['sites', 'create', '--account', server.demo.accountId, '--name', `Site ${name}`]);
  const created = await json([
    'installs',
    'create',
    '--account',
    server.demo.accountId,
    '--site',
    site.id,
    '--name',
    name,
    '--env',
    'production',
    '--wait',
  ]);
  assert.equal(created.operation.status, 'completed');
  return created.data as { id: string; name: string; site: { id: string } };
}

/** One active install for the tests that only add domains and certificates to it (each install costs time). */
let shared: ReturnType<typeof activeInstall> | undefined;
const sharedInstall = () => {
  shared ??= activeInstall();
  return shared;
};

describe('issue 23: hostplane-cli (packages/cli)', () => {
  it('the backup then restore journey with --wait and --json', async () => {
    const install = await activeInstall();
    const backup = await json(['backup', install.id, '--wait', '--description', 'before the change']);
    assert.equal(backup.operation.type, 'create_backup');
    assert.equal(backup.operation.status, 'completed');
    assert.match(backup.operation_url, /\/v1\/operations\//);
    const backupId: string = backup.data.id;

    const listed = await json(['backups', 'list', install.id]);
    const row = listed.results.find((b: { id: string }) => b.id === backupId);
    assert.equal(row?.status, 'completed');

    const restored = await json(['restore', install.id, backupId, '--wait']);
    assert.equal(restored.operation.type, 'restore_backup');
    assert.equal(restored.operation.status, 'completed');
    const op = await json(['operations', 'get', restored.operation.id]);
    assert.equal(op.status, 'completed');
    // Not a TTY: progress is plain lines on stderr, never on stdout (which holds the JSON).
    const plain = await ok(['backup', install.id, '--wait']);
    assert.match(plain.stderr, /operation [0-9a-f-]+ \(create_backup\): completed after \d+s/);
    assert.doesNotMatch(plain.stderr, /\r/);
  });

  it('issue 29 defect 10: installs, sites and accounts are taken by name: backup <name> works; an unknown name exits 4; a site name two sites carry exits 2 listing both ids', async () => {
    const install = await sharedInstall();
    // Before: `backup <name>` answered "400 install_id must match format "uuid"" (exit 5).
    const backup = await json(['backup', install.name, '--wait']);
    assert.equal(backup.operation.type, 'create_backup');
    assert.equal(backup.operation.status, 'completed');
    const listed = await json(['backups', 'list', install.name]);
    assert.ok(listed.results.some((b: { id: string }) => b.id === backup.data.id));
    assert.equal((await json(['installs', 'get', install.name])).id, install.id);
    assert.equal((await json(['operations', 'list', install.name])).results[0].type, 'create_backup');

    const unknown = await cli(['backup', 'nosuchinstall1']);
    assert.equal(unknown.code, EXIT.notFound, unknown.stderr);
    assert.match(unknown.stderr, /No install named "nosuchinstall1" is visible to this credential/);

    const account = await json(['accounts', 'get', server.demo.accountId]);
    assert.equal((await json(['accounts', 'get', account.name])).id, server.demo.accountId);
    const twin = `Twin ${randomUUID().slice(0, 8)}`;
    const a = await json(['sites', 'create', '--account', account.name, '--name', twin]);
    const b = await json(['sites', 'create', '--account', server.demo.accountId, '--name', twin]);
    const ambiguous = await cli(['sites', 'get', twin]);
    assert.equal(ambiguous.code, EXIT.usage, ambiguous.stderr);
    assert.match(
      ambiguous.stderr,
      new RegExp(`2 sites are named "${twin}": give the id of the one you mean`),
    );
    assert.ok(ambiguous.stderr.includes(a.id) && ambiguous.stderr.includes(b.id), ambiguous.stderr);
    await ok(['sites', 'delete', b.id]);
    assert.equal((await json(['sites', 'get', twin])).id, a.id);
    await ok(['sites', 'delete', twin]);
  });

  it('issue 29 defect 7: installs sign-in <name> prints a single-use link (the simulated host says so)', async () => {
    const install = await sharedInstall();
    const r = await ok(['installs', 'sign-in', install.name]);
    assert.match(
      r.stdout.trim(),
      /^https:\/\/[a-z0-9]+\.simulated\.invalid\/wp-login\.php\?hostplane_sign_in=[A-Za-z0-9_-]{43}$/,
    );
    assert.match(r.stderr, /it works once/);
    assert.match(r.stderr, /simulated/);
    const link = await json(['installs', 'sign-in', install.id]);
    assert.equal(link.simulated, true);
    assert.ok(Date.parse(link.expires_at) > Date.now());
  });

  it('people get tables; scripts get the API records with --json', async () => {
    const table = await ok(['sites', 'list', '--account', server.demo.accountId]);
    assert.match(table.stdout.split('\n')[0] ?? '', /^ID\s+NAME\s+ACCOUNT/);
    assert.match(table.stdout, /Demo Site/);
    const page = await json(['sites', 'list', '--limit', '1']);
    assert.equal(page.results.length, 1);
    assert.ok(page.count >= 1);
    const site = await json([
      'sites',
      'create',
      '--account',
      server.demo.accountId,
      '--name',
      'From CLI',
      '--tag',
      'cli',
    ]);
    assert.deepEqual(site.tags, ['cli']);
    const updated = await json(['sites', 'update', site.id, '--name', 'Renamed']);
    assert.equal(updated.name, 'Renamed');
    await ok(['sites', 'delete', site.id]);
  });

  it('exit codes: 401 -> 3, 404 -> 4, 422 -> 5 with the field error, failed operation -> 7, usage -> 2', async () => {
    const wrong = await cli(['sites', 'list'], {
      HOSTPLANE_URL: server.url,
      HOSTPLANE_USERNAME: server.demo.username,
      HOSTPLANE_PASSWORD: 'not-the-password',
    });
    assert.equal(wrong.code, EXIT.auth, wrong.stderr);
    assert.match(wrong.stderr, /401/);

    const missing = await cli(['sites', 'get', randomUUID()]);
    assert.equal(missing.code, EXIT.notFound, missing.stderr);

    const site = await json(['sites', 'create', '--account', server.demo.accountId, '--name', 'To transfer']);
    // T5: the destination must be another account (a 422 with a field error).
    const invalid = await cli(['transfer', site.id, '--to', server.demo.accountId]);
    assert.equal(invalid.code, EXIT.validation, invalid.stderr);
    assert.match(invalid.stderr, /422/);
    assert.match(invalid.stderr, /\n {2}destination_account_id: /);

    const install = await activeInstall();
    await admin('/admin/v1/faults', { operation: 'backup', count: ATTEMPTS_PER_STEP, mode: 'fail' });
    const failed = await cli(['backup', install.id, '--wait', '--json']);
    assert.equal(failed.code, EXIT.operationFailed, failed.stderr);
    assert.match(failed.stderr, /failed: The backup failed/);

    assert.equal((await cli(['no-such-command'])).code, EXIT.usage);
    assert.equal((await cli(['sites', 'create', '--name', 'no account'])).code, EXIT.usage);
    const none = await cli(['sites', 'list'], { HOSTPLANE_PROFILES_FILE: path.join(home, 'none.json') });
    assert.equal(none.code, EXIT.usage);
    assert.match(none.stderr, /No credentials/);
  });

  it('--dry-run (issue 23): prints what the API would do (a record, or its JSON), exits 0, never waits, and changes nothing', async () => {
    const install = await activeInstall();
    const other = await activeInstall();
    const backup = await json(['backup', install.id, '--wait']);
    const types = async (id: string) =>
      (await json(['operations', 'list', id])).results.map((op: { type: string }) => op.type).sort();
    const before = { install: await types(install.id), other: await types(other.id) };

    // restore: the API's answer, even with --wait (nothing to follow); no restore is started.
    const restore = await json(['restore', install.id, backup.data.id, '--dry-run', '--wait']);
    assert.equal(restore.dry_run, true);
    assert.equal(restore.operation, 'restore_backup');
    assert.equal(restore.install_id, install.id);
    assert.equal(restore.backup_id, backup.data.id);
    assert.equal(restore.operation_url, undefined, "the API's answer as it is: nothing was followed");
    const human = await ok(['backups', 'restore', install.id, backup.data.id, '--dry-run']);
    assert.match(human.stdout, /^dry_run\s+true$/m);
    assert.match(human.stdout, /^operation\s+restore_backup$/m);
    assert.equal(human.stderr, 'dry run: nothing was changed\n');

    // copy: C1-C6 checked, nothing copied.
    const copy = await json(['copy', install.id, other.id, '--no-files', '--dry-run', '--wait']);
    assert.deepEqual(
      [copy.dry_run, copy.operation, copy.destination_install_id, copy.include_files, copy.include_db],
      [true, 'copy_install', other.id, false, true],
    );

    // installs delete: what would stop serving; the install is still there and active.
    const deletion = await json(['installs', 'delete', install.id, '--dry-run']);
    assert.equal(deletion.dry_run, true);
    assert.ok(deletion.domains_that_would_stop_serving.length >= 1);
    assert.equal((await json(['installs', 'get', install.id])).status, 'active');
    assert.deepEqual(await types(install.id), before.install, 'no operation started on the source');
    assert.deepEqual(await types(other.id), before.other, 'no operation started on the destination');

    // users create, update and delete: the member list is as it was after each.
    const account = server.demo.accountId;
    const email = `dry-${randomUUID().slice(0, 8)}@example.test`;
    const person = ['--email', email, '--first-name', 'Dry', '--last-name', 'Run', '--roles', 'full'];
    const emails = async () =>
      (await json(['users', 'list', account])).results.map((u: { email: string }) => u.email);
    const invite = await json(['users', 'create', account, ...person, '--dry-run']);
    assert.equal(invite.dry_run, true);
    assert.ok(!(await emails()).includes(email), 'no user invited');
    const member = (await json(['users', 'create', account, ...person])).account_user;
    const change = await json([
      'users',
      'update',
      account,
      member.user_id,
      '--roles',
      'partial',
      '--dry-run',
    ]);
    assert.deepEqual(change.roles, { before: 'full', after: 'partial' });
    const removal = await json(['users', 'delete', account, member.user_id, '--dry-run']);
    assert.equal(removal.dry_run, true);
    const still = await json(['users', 'get', account, member.user_id]);
    assert.equal(still.roles, 'full');
    assert.ok((await emails()).includes(email), 'the member is not removed');
  });

  it("--dry-run (issue 23): a refused dry run exits non-zero with the API's message", async () => {
    const site = await json([
      'sites',
      'create',
      '--account',
      server.demo.accountId,
      '--name',
      'Dry transfer',
    ]);
    // T5: the destination must be another account (422).
    const transfer = await cli(['transfer', site.id, '--to', server.demo.accountId, '--dry-run']);
    assert.equal(transfer.code, EXIT.validation, transfer.stderr);
    assert.match(transfer.stderr, /^hostplane-cli: 422 .+\n {2}destination_account_id: /);
    assert.equal(transfer.stdout, '');
    assert.equal((await json(['transfers', 'list', site.id])).count, 0);
    // The one-owner rule: the demo account's only owner keeps the role (422 last_owner).
    const owners = (await json(['users', 'list', server.demo.accountId])).results.filter(
      (u: { roles: string }) => u.roles === 'owner',
    );
    assert.equal(owners.length, 1);
    const demote = await cli([
      'users',
      'update',
      server.demo.accountId,
      owners[0].user_id,
      '--roles',
      'full',
      '--dry-run',
    ]);
    assert.equal(demote.code, EXIT.validation, demote.stderr);
    assert.match(demote.stderr, /at least one owner/);
    const missing = await cli(['installs', 'delete', randomUUID(), '--dry-run', '--json']);
    assert.equal(missing.code, EXIT.notFound, missing.stderr);
    assert.match(missing.stderr, /404/);
  });

  it('--dry-run (issue 23) changes nothing: domains update (D4, D5) leaves primary and redirect as they were', async () => {
    const install = await sharedInstall();
    const name = () => `d${randomUUID().slice(0, 8)}.example.test`;
    const main = await json(['domains', 'create', install.id, name(), '--primary']);
    const other = await json(['domains', 'create', install.id, name()]);
    const primary = await json(['domains', 'update', install.id, other.id, '--primary', '--dry-run']);
    assert.equal(primary.dry_run, true);
    assert.deepEqual(primary.primary, { before: false, after: true });
    const redirect = await json([
      'domains',
      'update',
      install.id,
      other.id,
      '--redirect-to',
      main.id,
      '--dry-run',
    ]);
    assert.deepEqual(redirect.redirect_to, { before: null, after: main.id });
    const [mainAfter, otherAfter] = [
      await json(['domains', 'get', install.id, main.id]),
      await json(['domains', 'get', install.id, other.id]),
    ];
    assert.equal(mainAfter.primary, true, 'the primary is still the primary');
    assert.equal(otherAfter.primary, false);
    assert.deepEqual(otherAfter.redirects_to, [], 'no redirect was set');
    assert.equal((await json(['installs', 'get', install.id])).primary_domain, main.name);
  });

  it('--dry-run (issue 23) changes nothing: a valid transfer (T2-T8 pass) creates no transfer and moves nothing', async () => {
    // A second account the demo user owns, able to receive sites (T5).
    const account = server.demo.accountId;
    const destination = await admin('/admin/v1/accounts', {
      name: `Destination ${randomUUID().slice(0, 8)}`,
      preferred_data_center: 'us-central',
    });
    const owner = (await json(['users', 'list', account])).results.find(
      (u: { roles: string }) => u.roles === 'owner',
    );
    await admin(`/admin/v1/users/${owner.user_id}/memberships/${destination.id}`, { roles: 'owner' }, 'PUT');
    const site = await json(['sites', 'create', '--account', account, '--name', 'Dry valid transfer']);
    const answer = await json(['transfer', site.id, '--to', destination.id, '--dry-run', '--wait']);
    assert.equal(answer.dry_run, true);
    assert.equal(answer.operation, 'transfer_site');
    assert.equal(answer.destination_account_id, destination.id);
    assert.equal(answer.status, 'pending');
    assert.equal((await json(['transfers', 'list', site.id])).count, 0, 'no transfer record');
    assert.equal((await json(['sites', 'get', site.id])).account.id, account, 'the site did not move');
  });

  it('ssl import (L1, L2): --dry-run stores nothing, the import stores one; ssl list shows it; the key is never printed; a missing file exits 2', async () => {
    const install = await sharedInstall();
    const name = `s${randomUUID().slice(0, 8)}.example.test`;
    await ok(['domains', 'create', install.id, name]);
    const pki = createPki();
    const leaf = pki.leaf({ names: [name] });
    const dir = fs.mkdtempSync(path.join(home, 'tls-'));
    const cert = path.join(dir, 'fullchain.pem');
    const key = path.join(dir, 'privkey.pem');
    fs.writeFileSync(cert, leaf.certPem + pki.intermediate.certPem + pki.root.certPem);
    fs.writeFileSync(key, leaf.keyPem, { mode: 0o644 });
    fs.chmodSync(key, 0o644);
    const keyLine = leaf.keyPem.split('\n')[1] ?? '';
    const neverTheKey = (r: Result) => {
      const printed = r.stdout + r.stderr;
      assert.ok(!printed.includes(keyLine), 'no line of the key');
      assert.ok(!printed.includes(b64(leaf.keyPem).slice(0, 40)), 'nor its base64');
      assert.doesNotMatch(printed, /PRIVATE KEY/);
    };
    const importArgs = ['ssl', 'import', install.id, '--cert', cert, '--key', key];

    const missing = await cli([
      'ssl',
      'import',
      install.id,
      '--cert',
      path.join(dir, 'none.pem'),
      '--key',
      key,
    ]);
    assert.equal(missing.code, EXIT.usage, missing.stderr);
    assert.match(missing.stderr, /Cannot read the certificate file .*none\.pem: no such file/);
    assert.equal(
      (await cli(['ssl', 'import', install.id, '--cert', cert])).code,
      EXIT.usage,
      '--key required',
    );

    // Decision 126: a key file others may read is used, with a warning naming the fix.
    const dry = await cli([...importArgs, '--dry-run', '--json']);
    assert.equal(dry.code, 0, dry.stderr);
    assert.match(dry.stderr, /warning: the private key file .*privkey\.pem has mode 0644.*chmod 600/);
    neverTheKey(dry);
    const answer = JSON.parse(dry.stdout);
    assert.equal(answer.dry_run, true);
    assert.deepEqual([answer.install_id, answer.domains, answer.replaces], [install.id, [name], []]);
    const empty = await json(['ssl', 'list', install.id]);
    assert.deepEqual(empty.certificates, [], 'the dry run stored no certificate');

    fs.chmodSync(key, 0o600);
    const imported = await cli(importArgs);
    assert.equal(imported.code, 0, imported.stderr);
    assert.equal(imported.stderr, '', 'no warning at 0600');
    neverTheKey(imported);
    assert.match(imported.stdout, new RegExp(`^common_name\\s+${name.replaceAll('.', '\\.')}$`, 'm'));
    assert.match(imported.stdout, /^status\s+ENABLED$/m);
    const listed = await json(['ssl', 'list', install.id]);
    assert.equal(listed.certificates.length, 1);
    assert.deepEqual(listed.certificates[0].domains, [name]);
    const rows = await ok(['ssl', 'list', install.id]);
    assert.match(rows.stdout.split('\n')[0] ?? '', /^UUID\s+COMMON_NAME\s+DOMAINS\s+STATUS/);
    assert.match(
      rows.stdout,
      new RegExp(`^${listed.certificates[0].uuid}\\s+${name.replaceAll('.', '\\.')}`, 'm'),
    );
    neverTheKey(rows);
  });

  it('a profile file readable by others (0644) is refused with exit 9; at 0600 it is used', async () => {
    const file = path.join(home, 'profiles.json');
    const profile = { url: server.url, username: server.demo.username, password: server.demo.password };
    fs.writeFileSync(file, JSON.stringify({ work: profile }));
    fs.chmodSync(file, 0o644);
    const env = { HOSTPLANE_PROFILES_FILE: file };
    const refused = await cli(['accounts', 'list', '--profile', 'work'], env);
    assert.equal(refused.code, EXIT.profileFile);
    assert.match(refused.stderr, /mode is 0644.*chmod 600/);
    fs.chmodSync(file, 0o600);
    const used = await cli(['accounts', 'list', '--profile', 'work', '--json'], env);
    assert.equal(used.code, 0, used.stderr);
    assert.equal(JSON.parse(used.stdout).results[0].id, server.demo.accountId);
    // `profile set` writes a new file at 0600.
    const fresh = path.join(home, 'sub', 'new.json');
    const set = await cli(
      ['profile', 'set', 'default', '--url', server.url, '--username', server.demo.username],
      {
        HOSTPLANE_PROFILES_FILE: fresh,
        HOSTPLANE_PASSWORD: server.demo.password,
      },
    );
    assert.equal(set.code, 0, set.stderr);
    assert.equal(fs.statSync(fresh).mode & 0o777, 0o600);
    assert.equal((await cli(['accounts', 'list'], { HOSTPLANE_PROFILES_FILE: fresh })).code, 0);
  });

  it('every command has --help with an example, and completion scripts for bash and zsh', async () => {
    const program = buildProgram({
      env: {},
      io: { stdout: process.stdout, stderr: process.stderr },
      readStdin: async () => '',
    });
    const all = [program, ...program.commands, ...program.commands.flatMap((c) => c.commands)];
    assert.ok(all.length > 40);
    const example = /Example:\n( {2}\$ .*\n)* {2}\$ hostplane-cli /;
    // The bin once, as a user runs it; every command's help in this process (the same run(), ~0.5
    // CPU-s of a node start saved per command).
    const root = await cli(['--help'], {});
    assert.equal(root.code, 0);
    assert.match(root.stdout, example);
    for (const cmd of all) {
      let stdout = '';
      const io = {
        stdout: new Writable({
          write(chunk, _encoding, done) {
            stdout += String(chunk);
            done();
          },
        }),
        stderr: new Writable({ write: (_chunk, _encoding, done) => done() }),
      };
      const code = await run([...(cmd === program ? [] : commandPath(cmd)), '--help'], {}, io);
      assert.equal(code, 0, `${commandPath(cmd).join(' ')} --help`);
      assert.match(stdout, example, `${commandPath(cmd).join(' ')} --help`);
    }
    const bash = await ok(['completion', 'bash']);
    assert.match(bash.stdout, /complete -o default -F _hostplane_cli hostplane-cli/);
    assert.match(bash.stdout, /sites\)/);
    assert.match(bash.stdout, /ssl\)\n.*"list import"/);
    const syntax = spawn('bash', ['-n'], { stdio: ['pipe', 'ignore', 'pipe'] });
    syntax.stdin.end(bash.stdout);
    assert.equal(await new Promise((r) => syntax.on('close', r)), 0, 'bash -n accepts the script');
    const zsh = await ok(['completion', 'zsh']);
    assert.match(zsh.stdout, /^#compdef hostplane-cli/);
    assert.match(zsh.stdout, /'backup:Take a backup of an install'/);
    assert.match(zsh.stdout, /'import:Import a certificate chain/);
    assert.equal((await cli(['completion', 'fish'])).code, EXIT.usage);
  });
});

function commandPath(cmd: { name(): string; parent: unknown }): string[] {
  const names: string[] = [];
  let at: { name(): string; parent: unknown } | null = cmd;
  while (at?.parent) {
    names.unshift(at.name());
    at = at.parent as typeof at;
  }
  return names;
}
