// test-db: postgres (the subject is the local driver's file work on a real web tier, not the control plane's database: docs/decisions.md #112)
import assert from 'node:assert/strict';
import { type ChildProcess, execFile, execFileSync, spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { closeSync, constants, existsSync, openSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { factories } from '../support/factories.js';
import { buildTestApp, type Client, type Res } from '../support/harness.js';
import { operationOf, readyWorld } from '../support/jobs.js';
import { checksums, type LocalDriverProbe, localHosting } from '../support/local-hosting.js';
import { freePort, stopWebTier, userOf } from '../support/web-tier.js';

// Issue 28 findings 1, 2, 3 and 9a: the PHP of install A (its owner controls it completely: any plugin
// runs code as A's system user, which is what `runuser -u A -- php` does here) attacks the local
// driver's file work through its own tree. Every operation that could trip on it runs through the API
// (backup, restore, copy both ways, disk refresh, deprovision) and the test asserts what must not
// happen: a root-only canary's content in a tree, a file outside the installs created or changed, a
// setuid/setgid file in any tree (or a root-owned one ever in staging), a hung worker.
const TOOLS = [
  '/usr/sbin/nginx',
  '/usr/sbin/php-fpm8.2',
  '/usr/bin/php8.2',
  '/usr/share/wordpress/wp-settings.php',
];
const missing = TOOLS.filter((p) => !existsSync(p));

/** A deadline for one drain of the queue: an operation hung on a tenant's file fails the test, not the run. */
const DRAIN_DEADLINE_MS = 120_000;

describe('hostile tenant files (issue 28)', {
  skip: missing.length > 0 && `missing ${missing.join(', ')}`,
}, async () => {
  if (missing.length > 0) return;
  const port = await freePort();
  const host = await localHosting({ autoCleanup: false });
  const t = await buildTestApp({
    env: {
      ...host.env,
      LOCAL_WEB: 'on',
      HOSTING_HTTP_PORT: String(port),
      PUBLIC_URL: 'https://api.hostplane.test',
    },
  });
  const f = factories(t);
  const web = path.join(host.root, 'web');
  const seen: string[] = [];
  const racers = new Set<ChildProcess>();
  // Outside HOSTING_ROOT, root-only: a canary file whose content must never reach a tree, and a
  // watched directory (with a subdirectory) that must never change.
  const outside = await fs.mkdtemp(path.join(os.tmpdir(), 'hostile-outside-'));
  const canary = path.join(outside, 'canary', 'secret');
  const canaryText = `CANARY-${randomBytes(16).toString('hex')}`;
  const watched = path.join(outside, 'watched');
  await fs.mkdir(path.dirname(canary), { mode: 0o700 });
  await fs.writeFile(canary, `${canaryText}\n`, { mode: 0o600 });
  await fs.mkdir(path.join(watched, 'sub'), { recursive: true, mode: 0o700 });
  for (let i = 0; i < 30; i++)
    await fs.writeFile(path.join(watched, `f${i}`), `watched ${i}\n`, { mode: 0o600 });
  for (let i = 0; i < 10; i++)
    await fs.writeFile(path.join(watched, 'sub', `g${i}`), `sub ${i}\n`, { mode: 0o600 });
  await fs.chmod(outside, 0o700);
  const watchedSums = await checksums(watched);

  after(async () => {
    for (const racer of racers) racer.kill('SIGKILL');
    await stopWebTier(web, seen);
    await host.cleanup();
    await fs.rm(outside, { recursive: true, force: true });
  });

  /** Runs the queue with a deadline: a job that hangs fails the test (and is unblocked, see `unblock`). */
  let unblock: () => void = () => undefined;
  async function drain() {
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_r, reject) => {
      timer = setTimeout(() => {
        unblock();
        reject(new Error(`the queue did not drain in ${DRAIN_DEADLINE_MS / 1000} s: the worker hung`));
      }, DRAIN_DEADLINE_MS);
    });
    try {
      await Promise.race([t.runJobs(), deadline]);
    } finally {
      clearTimeout(timer);
    }
  }

  async function completed(client: Client, res: Res, what: string, status = 202) {
    assert.equal(res.status, status, `${what}: ${JSON.stringify(res.body)}`);
    await drain();
    const op = await operationOf(client, res);
    assert.equal(op.status, 'completed', `${what}: ${JSON.stringify(op).slice(0, 1500)}`);
    return op;
  }

  /** PHP run as the install's system user: exactly what any plugin of the install can do. */
  function asTenant(installId: string, code: string, env: Record<string, string> = {}) {
    return execFileSync('runuser', ['-u', userOf(installId), '--', 'php8.2', '-r', code], {
      encoding: 'utf8',
      cwd: '/',
      env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin', ...env },
    });
  }

  const w = await readyWorld(t, f);
  seen.push(w.install.id);
  const client = w.owner.client;
  const A = w.install.id;
  const bInstall = await f.install(client, w.account.id, w.site.id, 'staging');
  const B = bInstall.id as string;
  seen.push(B);
  await drain();
  for (const id of [A, B]) {
    const got = await client.get(`/v1/installs/${id}`);
    assert.equal(got.body.status, 'active', JSON.stringify(got.body));
  }
  const a = host.paths(A);
  const b = host.paths(B);
  const aConfig = path.join(a.public, 'wp-config.php');

  async function backup(id: string, description: string) {
    const res = await client.post(`/v1/installs/${id}/backups`, { description, notification_emails: [] });
    await completed(client, res, `backup: ${description}`);
    return res.body.id as string;
  }
  /** M7: a disk refresh answers 200 and points at its operation. */
  const refreshDisk = async (id: string, what: string) =>
    completed(client, await client.post(`/v1/installs/${id}/usage/refresh_disk_usage`), what, 200);
  const restore = async (id: string, backupId: string, restoreDatabase = false) =>
    client.post(`/v1/installs/${id}/backups/${backupId}/restore`, {
      notification_emails: [],
      restore_database: restoreDatabase,
      create_checkpoint: false,
    });
  const copy = (from: string, to: string) =>
    client.post('/v1/install_copy', {
      source_environment_id: from,
      destination_environment_id: to,
      custom_options: { include_files: true, db_tables: ['wp_posts'] },
    });

  /** Files (not followed links) under HOSTING_ROOT whose content holds the canary (FIFOs skipped). */
  function canaryHolders(): string[] {
    try {
      return execFileSync('grep', ['-r', '-l', '-F', '-D', 'skip', '--', canaryText, host.root], {
        encoding: 'utf8',
      })
        .trim()
        .split('\n');
    } catch (err) {
      if ((err as { status?: number }).status === 1) return [];
      throw err;
    }
  }
  /** Setuid or setgid files and directories anywhere under HOSTING_ROOT. */
  const setIdFiles = (extra: string[] = []) =>
    execFileSync('find', [host.root, ...extra, '-perm', '/6000', '-print'], { encoding: 'utf8' })
      .trim()
      .split('\n')
      .filter(Boolean);

  async function assertOutsideUntouched() {
    assert.deepEqual(
      await checksums(watched),
      watchedSums,
      'the watched directory outside the installs changed',
    );
    assert.equal((await fs.readFile(canary, 'utf8')).trim(), canaryText, 'the canary file was written');
    assert.deepEqual(canaryHolders(), [], "the canary's content reached a tree");
  }

  const baseline = await backup(A, 'clean');

  it('issue 28 finding 1: a wp-config.php linked to a root-only file or outside is never read nor written through (restore, copy both ways)', async () => {
    // Read: A's live wp-config.php becomes a link to the canary; a restore and a copy into A bring
    // the install's own wp-config.php (the old code copied the link's target into the tree, as root).
    const linkTo = (target: string) =>
      asTenant(A, '@unlink(getenv("F")); symlink(getenv("T"), getenv("F"));', { F: aConfig, T: target });
    linkTo(canary);
    await completed(client, await restore(A, baseline), 'restore over a wp-config.php linked to the canary');
    await assertOutsideUntouched();
    linkTo(canary);
    await completed(client, await copy(B, A), 'copy B -> A over a wp-config.php linked to the canary');
    await assertOutsideUntouched();
    // A copy A -> B takes A's link along (the old code kept absolute links and wrote B's config through it).
    linkTo(path.join(watched, 'f1'));
    await completed(client, await copy(A, B), 'copy A -> B of a wp-config.php linked outside');
    await assertOutsideUntouched();
    // Write: an absolute link taken into a backup, a regular file put back, then a restore (the old
    // code recreated the link in staging and wrote the live file through it, as root).
    linkTo(path.join(watched, 'planted'));
    const linked = await backup(A, 'wp-config.php linked outside');
    asTenant(
      A,
      '@unlink(getenv("F")); file_put_contents(getenv("F"), "* * * * * root touch /tmp/pwned\\n");',
      {
        F: aConfig,
      },
    );
    await completed(
      client,
      await restore(A, linked),
      'restore of a backup holding an absolute wp-config.php link',
    );
    await assertOutsideUntouched();
    assert.equal(existsSync(path.join(watched, 'planted')), false);
    // A still runs on its own configuration: a regular file of its user's, 0640, with its account.
    const config = await fs.lstat(aConfig);
    assert.ok(config.isFile(), 'wp-config.php is a regular file again');
    assert.equal(config.mode & 0o777, 0o640);
    const uid = Number(execFileSync('id', ['-u', userOf(A)], { encoding: 'utf8' }).trim());
    assert.equal(config.uid, uid);
    const account = await (t.app.services.driver as unknown as LocalDriverProbe).accountOf(A);
    const text = await fs.readFile(aConfig, 'utf8');
    assert.ok(account && text.includes(account.password), "wp-config.php holds A's own database password");
    for (const id of [A, B]) {
      const dir = host.paths(id).public;
      assert.ok((await fs.lstat(path.join(dir, 'wp-settings.php'))).isFile(), `${id} still has WordPress`);
    }
  });

  it('issue 28 finding 2: a setuid /bin/sh and a setgid file of A never come out setuid in any tree (copy, restore), nor root-owned in staging', async () => {
    asTenant(
      A,
      'copy("/bin/sh", getenv("D") . "/sh"); chmod(getenv("D") . "/sh", 04755); copy("/bin/sh", getenv("D") . "/sg"); chmod(getenv("D") . "/sg", 02755);',
      { D: path.join(a.public, 'wp-content', 'uploads') },
    );
    assert.equal(setIdFiles().length, 2, 'the tenant made its two files');
    const withSetuid = await backup(A, 'setuid inside');
    // Watches every tree while the driver works: a root-owned setuid file is a root shell for anyone.
    const rootOwned = new Set<string>();
    let watching = true;
    const poll = (async () => {
      while (watching) {
        const found = await new Promise<string>((resolve) =>
          execFile('find', [host.root, '-perm', '/6000', '-uid', '0', '-print'], (_e, out) => resolve(out)),
        );
        for (const line of found.split('\n')) if (line) rootOwned.add(line);
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    try {
      await completed(client, await copy(A, B), 'copy A -> B with a setuid file');
      await completed(client, await restore(A, withSetuid, true), 'restore of a backup with a setuid file');
      await completed(client, await copy(B, A), 'copy B -> A');
    } finally {
      watching = false;
      await poll;
    }
    assert.deepEqual([...rootOwned], [], 'a root-owned setuid/setgid file existed under HOSTING_ROOT');
    assert.deepEqual(setIdFiles(), [], 'a setuid/setgid file is left in a tree');
    // The files themselves came through (only the bits went).
    for (const dir of [a.public, b.public]) {
      const sh = await fs.stat(path.join(dir, 'wp-content', 'uploads', 'sh'));
      assert.equal(sh.mode & 0o7777, 0o755);
    }
    await assertOutsideUntouched();
  });

  it("issue 28 finding 9a: a FIFO at wp-includes/version.php: a backup and a disk refresh complete and the worker keeps running B's jobs", async () => {
    const version = path.join(a.public, 'wp-includes', 'version.php');
    const real = await fs.readFile(version);
    asTenant(A, 'unlink(getenv("F")); posix_mkfifo(getenv("F"), 0644);', { F: version });
    // The old code's open() of the FIFO never returns: a writer opened here frees the blocked thread.
    unblock = () => {
      try {
        closeSync(openSync(version, constants.O_WRONLY | constants.O_NONBLOCK));
      } catch {}
    };
    try {
      await backup(A, 'a FIFO inside');
      await refreshDisk(A, 'disk refresh of A');
      await refreshDisk(B, 'disk refresh of B');
    } finally {
      unblock = () => undefined;
      asTenant(A, 'unlink(getenv("F")); file_put_contents(getenv("F"), base64_decode(getenv("C")));', {
        F: version,
        C: real.toString('base64'),
      });
    }
    // B's job still runs after all that (the worker was not left with blocked threads).
    await backup(B, 'after the FIFO');
    await assertOutsideUntouched();
  });

  it('issue 28 finding 3: a process of A swapping its directories for links to a root-owned directory while the driver deletes its old tree changes nothing outside', async () => {
    // Each round races a restore (its racer a busy PHP process): `npm test` runs 2, `npm run
    // test:hostile` 12 (HOSTILE_RACE_ROUNDS; the suite's budget, docs/decisions.md #230).
    const ROUNDS = Number(process.env.HOSTILE_RACE_ROUNDS ?? 2);
    const DIRS = 60;
    const old = `${a.public}.old`;
    // The racer (A's PHP): whenever the old tree exists, each dN in it is renamed away and replaced by
    // a link to the watched directory, again and again, until told to stop.
    const racer = `
      $old = getenv('OLD'); $w = getenv('W'); $stop = getenv('STOP'); $n = (int) getenv('N');
      $end = microtime(true) + 120;
      while (microtime(true) < $end && !file_exists($stop)) {
        if (!@is_dir($old)) { usleep(100); continue; }
        for ($i = 0; $i < $n; $i++) {
          $d = "$old/d$i";
          if (@is_dir($d) && !@is_link($d) && @rename($d, "$old/x$i" . mt_rand())) @symlink($w, $d);
        }
        clearstatcache();
      }`;
    const stopFile = path.join(host.root, 'stop-racer');
    for (let round = 0; round < ROUNDS; round++) {
      asTenant(
        A,
        'for ($i = 0; $i < (int) getenv("N"); $i++) { @mkdir(getenv("P") . "/d$i"); for ($j = 0; $j < 5; $j++) file_put_contents(getenv("P") . "/d$i/f$j", "x"); }',
        { P: a.public, N: String(DIRS) },
      );
      await fs.rm(stopFile, { force: true });
      const child = spawn('runuser', ['-u', userOf(A), '--', 'php8.2', '-r', racer], {
        cwd: '/',
        env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin', OLD: old, W: watched, STOP: stopFile, N: String(DIRS) },
        stdio: 'ignore',
      });
      racers.add(child);
      const res = await restore(A, baseline);
      assert.equal(res.status, 202, JSON.stringify(res.body));
      await drain();
      await fs.writeFile(stopFile, '');
      // The racer may have ended already (its own 120 s, or an early exit): its 'exit' event is gone.
      if (child.exitCode === null && child.signalCode === null)
        await new Promise((r) => {
          child.once('exit', r);
          setTimeout(() => {
            child.kill('SIGKILL');
            r(undefined);
          }, 10_000).unref();
        });
      racers.delete(child);
      const op = await operationOf(client, res);
      // The tenant's own race may fail its own restore; it must never reach outside.
      assert.ok(['completed', 'failed'].includes(String(op.status)), JSON.stringify(op));
      assert.deepEqual(
        await checksums(watched),
        watchedSums,
        `round ${round}: the watched directory changed`,
      );
    }
    await assertOutsideUntouched();
  });

  it("issue 30 (decision 235): a move's final sync of A after A linked the canary and the watched directory, made a FIFO and a setuid file: indexed and archived as A (links as links, the FIFO never opened), applied to its copy with no setuid bit and nothing outside read or changed", async () => {
    const driver = t.app.services.driver;
    const refOf = async (id: string) => {
      const got = (await client.get(`/v1/installs/${id}`)).body;
      return { id, name: got.name as string, wp_version: null };
    };
    const [fromA, toB] = [await refOf(A), await refOf(B)];
    const move = randomUUID();
    const call = (step: string) => ({ key: `move:${move}:${step}`, signal: AbortSignal.timeout(120_000) });
    const done = <T>(r: { done: true; value: T } | { done: false }) => {
      assert.ok(r.done);
      return r.value;
    };
    // The move's copy: A's backup keeping its tree's index, restored onto B with its tables' fingerprints.
    const first = done(await driver.backup(call('copy-backup'), { ...fromA, index_files: true }));
    const copied = done(
      await driver.restore(call('copy-restore'), {
        install: toB,
        snapshot: first,
        restore_database: true,
        table_fingerprints: true,
      }),
    );
    assert.ok(copied.table_fingerprints);
    // A's PHP after the copy: links to the canary and to the watched directory, a FIFO, a setuid file.
    asTenant(
      A,
      'chdir(getenv("D")); symlink(getenv("C"), "leak"); symlink(getenv("W"), "watched"); posix_mkfifo("pipe", 0600); copy("/bin/sh", "sh2"); chmod("sh2", 04755); file_put_contents("note.txt", "after the copy");',
      { D: path.join(a.public, 'wp-content'), C: canary, W: watched },
    );
    const last = done(
      await driver.backup(call('final-backup'), {
        ...fromA,
        changes_since: { location: first.location ?? '', tables: copied.table_fingerprints },
      }),
    );
    assert.ok(last.incremental, 'the final backup holds the changes only');
    const listing = execFileSync(
      'tar',
      ['-tvzf', path.join(host.root, 'backups', last.location ?? '', 'files.tar.gz')],
      { encoding: 'utf8' },
    );
    assert.match(listing, /\.\/wp-content\/leak -> /, 'the link archived as a link');
    assert.match(listing, /^p.*\.\/wp-content\/pipe$/m, 'the FIFO archived as a FIFO');
    done(
      await driver.restore(call('final-restore'), { install: toB, snapshot: last, restore_database: true }),
    );
    const onB = path.join(b.public, 'wp-content');
    assert.equal(await fs.readlink(path.join(onB, 'leak')), canary);
    assert.equal(await fs.readlink(path.join(onB, 'watched')), watched);
    assert.equal(await fs.readFile(path.join(onB, 'note.txt'), 'utf8'), 'after the copy');
    assert.equal((await fs.stat(path.join(onB, 'sh2'))).mode & 0o7777, 0o755, 'no setuid bit on the copy');
    assert.deepEqual(
      execFileSync('find', [b.public, '-perm', '/6000', '-print'], { encoding: 'utf8' }).trim(),
      '',
    );
    await assertOutsideUntouched();
  });

  it('issue 28 findings 1-3: deleting A with links to the canary and the watched directory, a FIFO and a setuid file in its tree removes A and nothing else; B still serves', async () => {
    asTenant(
      A,
      `symlink(getenv("W"), getenv("P") . "/evil-dir"); symlink(getenv("C"), getenv("P") . "/evil-file");
       posix_mkfifo(getenv("P") . "/fifo", 0644); copy("/bin/sh", getenv("P") . "/sh"); chmod(getenv("P") . "/sh", 04755);`,
      { W: watched, C: canary, P: a.public },
    );
    await refreshDisk(A, 'disk refresh');
    const res = await client.delete(`/v1/installs/${A}`);
    assert.equal(res.status, 204, JSON.stringify(res.body));
    await drain();
    assert.equal(existsSync(a.dir), false, "A's directory is gone");
    await assertOutsideUntouched();
    assert.deepEqual(setIdFiles(), []);
    await backup(B, 'after deleting A');
  });
});
