// test-db: postgres (the web tier's subject is nginx, PHP-FPM, WordPress and ACME, not the control plane's database: docs/decisions.md #112)
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { sql } from 'drizzle-orm';
import { isAlive, queryRows } from '../../src/db/client.js';
import { resealSecrets } from '../../src/reseal.js';
import { createSecretBox } from '../../src/secrets.js';
import { TEST_DB } from '../support/databases.js';
import { factories } from '../support/factories.js';
import { ADMIN_TOKEN, buildTestApp, type Json, SECRET_KEY } from '../support/harness.js';
import { operationOf, readyWorld } from '../support/jobs.js';
import { localHosting } from '../support/local-hosting.js';
import { runCli } from '../support/process.js';
import { freePort, stopWebTier, userOf } from '../support/web-tier.js';

// Issue 21 (first slice): HOSTING_DRIVER=local with LOCAL_WEB=on serves installs with Debian's nginx,
// php8.2-fpm and wordpress (scripts/test.sh installs them). nginx and PHP-FPM run from this file's
// own HOSTING_ROOT on a free port and are stopped after it.
const TOOLS = [
  '/usr/sbin/nginx',
  '/usr/sbin/php-fpm8.2',
  '/usr/bin/php8.2',
  '/usr/share/wordpress/wp-settings.php',
];
const missing = TOOLS.filter((p) => !existsSync(p));

/** GET / on nginx with the install's host name: status and body, or null when nginx closed the connection. */
/** LOCAL_PHP_REQUEST_TIMEOUT_SECONDS of this file's web tier (decision 252). */
const PHP_REQUEST_TIMEOUT_SECONDS = 20;

function get(
  port: number,
  host: string,
  urlPath = '/',
  headers: Record<string, string> = {},
): Promise<{ status: number; body: string; headers: http.IncomingHttpHeaders } | null> {
  return new Promise((resolve) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        path: urlPath,
        headers: { ...headers, host: `${host}:${port}` },
        timeout: 30_000,
        // A connection of its own: a kept-alive one that an nginx reload (any provisioning) closes as
        // the request is sent fails on this side without an answer (a browser would retry it).
        agent: false,
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          body += c;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers }));
      },
    );
    req.on('error', () => resolve(null));
    req.on('timeout', () => req.destroy());
    req.end();
  });
}

/** POST a form to nginx with the install's host name: status and headers (the body is drained). */
function postForm(
  port: number,
  host: string,
  urlPath: string,
  form: Record<string, string>,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: http.IncomingHttpHeaders } | null> {
  const body = new URLSearchParams(form).toString();
  return new Promise((resolve) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        path: urlPath,
        method: 'POST',
        headers: {
          ...headers,
          host: `${host}:${port}`,
          'content-type': 'application/x-www-form-urlencoded',
          'content-length': String(Buffer.byteLength(body)),
        },
        timeout: 30_000,
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers }));
      },
    );
    req.on('error', () => resolve(null));
    req.on('timeout', () => req.destroy());
    req.end(body);
  });
}

/** Logs into WordPress (wp-login.php, its test cookie sent): whether it set the logged-in cookie. */
async function logsIn(port: number, host: string, username: string, password: string) {
  const res = await postForm(
    port,
    host,
    '/wp-login.php',
    { log: username, pwd: password, 'wp-submit': 'Log In', testcookie: '1' },
    { cookie: 'wordpress_test_cookie=WP%20Cookie%20check' },
  );
  assert.ok(res, 'wp-login.php answered');
  const cookies = res.headers['set-cookie'] ?? [];
  return cookies.some((c) => c.startsWith('wordpress_logged_in_'));
}

/** The tables (every schema) whose rows, as text, contain `needle`. */
async function tablesHolding(db: Parameters<typeof queryRows>[0], needle: string) {
  const tables = await queryRows<{ schema: string; name: string }>(
    db,
    sql`select table_schema as schema, table_name as name from information_schema.tables
        where table_type = 'BASE TABLE' and table_schema not in ('pg_catalog', 'information_schema')`,
  );
  const holding: string[] = [];
  for (const { schema, name } of tables) {
    const [row] = await queryRows<{ n: number }>(
      db,
      sql`select count(*)::int as n from ${sql.identifier(schema)}.${sql.identifier(name)} as r
          where position(${needle} in r::text) > 0`,
    );
    if ((row?.n ?? 0) > 0) holding.push(`${schema}.${name}`);
  }
  return holding;
}

/** Asks until `ok` holds (a reload's new workers take a moment), answering the last response. */
async function until(
  port: number,
  host: string,
  ok: (r: Awaited<ReturnType<typeof get>>) => boolean,
  urlPath = '/',
) {
  let last: Awaited<ReturnType<typeof get>> = null;
  for (let i = 0; i < 50; i++) {
    last = await get(port, host, urlPath);
    if (ok(last)) return last;
    await new Promise((r) => setTimeout(r, 200));
  }
  return last;
}

const slugOf = (id: string) => `hp_${id.replace(/-/g, '')}`;

describe('local driver web tier (issue 21)', {
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
      // A runaway request is ended after this long (its test below); longer than the 12 s request.
      LOCAL_PHP_REQUEST_TIMEOUT_SECONDS: String(PHP_REQUEST_TIMEOUT_SECONDS),
    },
  });
  const f = factories(t);
  const web = path.join(host.root, 'web');
  const seen: string[] = [];

  after(async () => {
    await stopWebTier(web, seen);
    await host.cleanup();
  });

  async function served() {
    const w = await readyWorld(t, f);
    seen.push(w.install.id);
    host.paths(w.install.id);
    const install = await w.owner.client.get(`/v1/installs/${w.install.id}`);
    if (install.body.status !== 'active') {
      const ops = await w.owner.client.get(`/v1/installs/${w.install.id}/operations`);
      assert.fail(`not provisioned: ${JSON.stringify(ops.body).slice(0, 1500)}`);
    }
    return { w, cname: install.body.cname as string, install: install.body as Json };
  }

  it('issue 21: a production install serves WordPress on its cname (site title, first post); deleting it stops that', async () => {
    const { w, cname, install } = await served();
    // Issue 29 defect 9: none in the creation's answer (pending), then the version of its files.
    assert.equal(w.install.wp_version, null);
    assert.equal(install.wp_version, '6.1.9');
    assert.match(String(install.php_version), /^8\.2\.\d+$/);
    const page = await until(port, cname, (r) => r?.status === 200);
    assert.equal(page?.status, 200, JSON.stringify(page).slice(0, 500));
    assert.ok(page?.body.includes(w.site.name), 'the site title is on the front page');
    assert.match(page?.body ?? '', /Hello world!/);
    // A host nginx does not serve: the connection is closed (the default server's 444).
    assert.equal(await get(port, `nobody.${cname}`), null);
    // The install's own user, pool and wp-config.php (not readable by others).
    const wpConfig = await fs.stat(path.join(host.paths(w.install.id).public, 'wp-config.php'));
    assert.equal(wpConfig.mode & 0o777, 0o640);
    assert.ok(existsSync(path.join(web, 'pools', `${slugOf(w.install.id)}.conf`)));

    const res = await w.owner.client.delete(`/v1/installs/${w.install.id}`);
    assert.equal(res.status, 204);
    await t.runJobs();
    const gone = await until(port, cname, (r) => r === null || r.status === 404);
    assert.ok(gone === null || gone.status === 404, `still served: ${gone?.status}`);
    assert.equal(existsSync(path.join(web, 'sites', `${slugOf(w.install.id)}.conf`)), false);
    assert.equal(existsSync(path.join(web, 'pools', `${slugOf(w.install.id)}.conf`)), false);
    assert.throws(() => execFileSync('id', ['-u', userOf(w.install.id)], { stdio: 'ignore' }));
    // Its group too (nginx's user is a member of it, so userdel left it: one system GID lost per
    // install deleted, until useradd found none left).
    assert.equal(
      readFileSync('/etc/group', 'utf8')
        .split('\n')
        .some((line) => line.startsWith(`${userOf(w.install.id)}:`)),
      false,
    );
  });

  it("issue 21: the owner's WordPress administrator: its password is shown once (the owner's first read of the provisioning), logs into WordPress, is sealed until then and never stored in clear", async () => {
    const { w, cname } = await served();
    const ops = await w.owner.client.get(`/v1/installs/${w.install.id}/operations`);
    const listed = (ops.body.results as Json[]).find((o) => o.type === 'provision_install');
    assert.equal(listed?.status, 'completed', JSON.stringify(ops.body));
    const loginUrl = `http://${cname}:${port}/wp-login.php`;
    // The list shows who and where, never the password (it does not spend the one showing).
    assert.deepEqual(listed.wordpress_admin, { username: 'admin', login_url: loginUrl });
    const opPath = `/v1/operations/${listed.id}`;

    // A member who is not an owner reads it without the password, and does not spend it.
    const full = await f.user([{ account_id: w.account.id, roles: 'full' }]);
    const byFull = await full.client.get(opPath);
    assert.equal(byFull.status, 200, JSON.stringify(byFull.body));
    assert.deepEqual(byFull.body.wordpress_admin, { username: 'admin', login_url: loginUrl });

    // Until shown it is sealed (with the operation), and `hostplane reseal` moves it to a new key.
    const context = `operation-secret:${listed.id}`;
    const sealedOf = async () =>
      (
        await queryRows<{ sealed: string | null }>(
          t.database.db,
          sql`select secret_sealed as sealed from operations where id = ${listed.id}`,
        )
      )[0]?.sealed ?? null;
    const sealed = await sealedOf();
    assert.ok(sealed, 'the password waits sealed');
    const clear = createSecretBox(SECRET_KEY).open(sealed, context).toString('utf8');
    const next = `rotated-${SECRET_KEY}`;
    assert.ok((await resealSecrets(t.database, SECRET_KEY, next)).resealed >= 1);
    const resealed = await sealedOf();
    assert.ok(resealed);
    assert.equal(createSecretBox(next).open(resealed, context).toString('utf8'), clear);
    assert.throws(() => createSecretBox(SECRET_KEY).open(resealed, context));
    await resealSecrets(t.database, next, SECRET_KEY);
    // The driver kept its own sealed copy only until the operation held it.
    const [local] = await queryRows<{ sealed: string | null }>(
      t.database.db,
      sql`select admin_password_sealed as sealed from local_installs where install_id = ${w.install.id}`,
    );
    assert.equal(local?.sealed, null);

    // The owner's first read shows it...
    const first = await w.owner.client.get(opPath);
    assert.equal(first.status, 200, JSON.stringify(first.body));
    const admin = first.body.wordpress_admin as Json;
    assert.equal(admin.username, 'admin');
    assert.equal(admin.login_url, loginUrl);
    assert.match(String(admin.password), /^[A-Za-z0-9_-]{24}$/);
    assert.equal(admin.password, clear);
    assert.equal(first.headers['cache-control'], 'private, no-store');
    // ... and erases it: later reads show who and where only.
    const second = await w.owner.client.get(opPath);
    assert.deepEqual(second.body.wordpress_admin, { username: 'admin', login_url: loginUrl });
    assert.equal(second.headers['cache-control'], undefined);
    assert.equal(await sealedOf(), null);
    // Nowhere in the database in clear (operations, driver tasks, events, webhooks, audit, mail, jobs).
    assert.deepEqual(await tablesHolding(t.database.db, admin.password), []);
    assert.equal(JSON.stringify(t.jobLog).includes(admin.password), false);

    // It is the administrator's password in WordPress: wp-login.php logs in with it, not with another.
    assert.equal(await logsIn(port, cname, 'admin', `${admin.password}x`), false);
    assert.equal(await logsIn(port, cname, 'admin', admin.password), true);
  });

  it('issue 21: a configuration that fails nginx -t fails the provisioning and the served site still answers', async () => {
    const first = await served();
    assert.equal((await until(port, first.cname, (r) => r?.status === 200))?.status, 200);
    // Fault: a broken file among the server blocks (as a hand edit would leave it).
    const broken = path.join(web, 'sites', 'zz-broken.conf');
    await fs.writeFile(broken, 'server { listen oops; \n');
    try {
      const w2 = await f.install(first.w.owner.client, first.w.account.id, first.w.site.id, 'staging');
      seen.push(w2.id);
      host.paths(w2.id);
      await t.runJobs();
      const second = await first.w.owner.client.get(`/v1/installs/${w2.id}`);
      assert.equal(second.body.status, 'pending');
      const ops = await first.w.owner.client.get(`/v1/installs/${w2.id}/operations`);
      assert.equal(ops.body.results[0].status, 'failed');
      assert.match(ops.body.results[0].error, /nginx refused the new configuration, the running one is kept/);
      assert.equal(existsSync(path.join(web, 'sites', `${slugOf(w2.id)}.conf`)), false);
      // nginx kept its running configuration: the first site still answers.
      const page = await get(port, first.cname);
      assert.equal(page?.status, 200);
      assert.match(page?.body ?? '', /Hello world!/);
    } finally {
      await fs.rm(broken, { force: true });
    }
  });

  it("issue 21, decision 251: two installs: one's PHP cannot read the other's wp-config.php (nor /etc/passwd); each has a PHP-FPM master of its own: the other is provisioned and served, and the first's other requests answered, while a slow request of the first runs; neither sees the other's cached scripts", async () => {
    const a = await served();
    const aPublic = host.paths(a.w.install.id).public;
    const masterOf = (id: string) =>
      Number(readFileSync(path.join(web, 'run', `php-fpm.${slugOf(id)}.pid`), 'utf8').trim());
    const aMaster = masterOf(a.w.install.id);
    // A 12 s request of A, started before B is provisioned. With one master for every pool, B's pool
    // reloaded it, and a reload waits for the requests in flight (up to process_control_timeout) before
    // any pool takes a new one: B was not served, nor any other request of A, until A's slow one ended.
    // With a master per install, B's provisioning does not touch A's.
    const slow = path.join(aPublic, 'slow.php');
    const quick = path.join(aPublic, 'quick.php');
    // Short sleeps to a wall-clock end: a reload's signal cuts one sleep short, not the request.
    await fs.writeFile(
      slow,
      '<?php touch(__DIR__ . "/slow.started"); $end = microtime(true) + 12; while (microtime(true) < $end) usleep(100000); echo "slept";\n',
    );
    await fs.writeFile(quick, '<?php echo "quick";\n');
    execFileSync('chown', [`${userOf(a.w.install.id)}:${userOf(a.w.install.id)}`, slow, quick]);
    // Served first: right after its provisioning's reload an old nginx worker may close a connection.
    assert.equal((await until(port, a.cname, (r) => r?.status === 200))?.status, 200);
    const started = Date.now();
    let slowEnded = 0;
    const inFlight = get(port, a.cname, '/slow.php').then((r) => {
      slowEnded = Date.now();
      return r;
    });
    // In A's PHP before B is provisioned: nginx has read it (a reload then lets it end; one that came
    // before nginx read it could close its connection unanswered, as for any request then).
    const marker = path.join(aPublic, 'slow.started');
    for (let i = 0; i < 100 && !existsSync(marker); i++) await new Promise((r) => setTimeout(r, 50));
    assert.ok(existsSync(marker), "A's slow request reached its PHP");
    const b = await served();
    assert.equal((await until(port, b.cname, (r) => r?.status === 200))?.status, 200, 'B served');
    const bServed = Date.now();
    assert.equal((await get(port, a.cname, '/quick.php'))?.body, 'quick');
    const quickAnswered = Date.now();
    const answered = await inFlight;
    assert.deepEqual(
      { status: answered?.status, body: answered?.body },
      { status: 200, body: 'slept' },
      "A's request in flight while B's pool was added",
    );
    const at = (t: number) => `+${((t - started) / 1000).toFixed(1)} s`;
    assert.ok(
      slowEnded > quickAnswered,
      `B served (${at(bServed)}) and A's quick request answered (${at(quickAnswered)}) while A's slow request ran (it ended ${at(slowEnded)})`,
    );
    assert.equal(masterOf(a.w.install.id), aMaster, "A's master is the one it had");
    assert.notEqual(masterOf(b.w.install.id), aMaster, 'B has a master of its own');
    const bConfig = path.join(host.paths(b.w.install.id).public, 'wp-config.php');
    assert.ok(existsSync(bConfig));
    // A small PHP file in A's document root, owned by A's user (as anything A's WordPress writes).
    const probe = path.join(aPublic, 'probe.php');
    const read = (file: string) =>
      `echo ${JSON.stringify(file)}, ': ', @file_get_contents(${JSON.stringify(file)}) === false ? 'DENIED' : 'OK', "\\n";`;
    // Decision 251: the opcode cache is its master's: A's PHP lists the scripts it holds (with one
    // master for every pool, B's WordPress files were among them, paths and all).
    const bRoot = path.dirname(host.paths(b.w.install.id).public);
    const opcache = `$s = @opcache_get_status(true); $all = is_array($s) ? array_keys($s['scripts'] ?? []) : [];
echo 'opcache scripts: ', count($all), "\\n";
foreach ($all as $f) { if (str_starts_with($f, ${JSON.stringify(`${bRoot}/`)})) echo 'FOREIGN ', $f, "\\n"; }`;
    await fs.writeFile(
      probe,
      `<?php\n${opcache}\n${read(bConfig)}\n${read('/etc/passwd')}\n${read(path.join(aPublic, 'wp-config.php'))}\n`,
    );
    execFileSync('chown', [`${userOf(a.w.install.id)}:${userOf(a.w.install.id)}`, probe]);
    // Older than opcache.file_update_protection (2 s): the probe itself is cached at its first run.
    const past = new Date(Date.now() - 60_000);
    await fs.utimes(probe, past, past);
    const page = await until(port, a.cname, (r) => r?.status === 200, '/probe.php');
    assert.equal(page?.status, 200, JSON.stringify(page).slice(0, 500));
    // The cache is on and holds A's scripts (the check cannot pass for want of a cache), none of B's.
    assert.ok(Number(/opcache scripts: (\d+)/.exec(page?.body ?? '')?.[1]) > 0, page?.body);
    assert.doesNotMatch(page?.body ?? '', /FOREIGN/);
    assert.ok(page?.body.includes(`${bConfig}: DENIED`), page?.body);
    assert.match(page?.body ?? '', /\/etc\/passwd: DENIED/);
    // The probe works: A's PHP reads A's own wp-config.php.
    assert.match(page?.body ?? '', /wp-config\.php: OK\s*$/);
    // B's host does not serve A's probe.
    assert.notEqual((await get(port, b.cname, '/probe.php'))?.status, 200);
  });

  it("decision 252: a site's PHP request running past LOCAL_PHP_REQUEST_TIMEOUT_SECONDS is ended by its PHP-FPM master whatever its code asked (set_time_limit(0), ignore_user_abort): answered 502, its process gone, the site serving", async () => {
    const { w, cname } = await served();
    const pub = host.paths(w.install.id).public;
    const runaway = path.join(pub, 'runaway.php');
    const pidFile = path.join(pub, 'runaway.pid');
    // As a plugin stuck in a loop would (short sleeps: no CPU spent on it here).
    await fs.writeFile(
      runaway,
      "<?php set_time_limit(0); ignore_user_abort(true); file_put_contents(__DIR__ . '/runaway.pid', (string) getmypid()); while (true) usleep(200000);\n",
    );
    execFileSync('chown', [`${userOf(w.install.id)}:${userOf(w.install.id)}`, runaway]);
    // Served first: right after its provisioning's reload an old nginx worker may close a connection.
    assert.equal((await until(port, cname, (r) => r?.status === 200))?.status, 200);
    const started = Date.now();
    const answered = await get(port, cname, '/runaway.php');
    const took = Date.now() - started;
    // Without the limit nginx gives up at 60 s (fastcgi_read_timeout) and the PHP process runs on:
    // this client's own 30 s timeout ends first (null).
    assert.equal(answered?.status, 502, `answered ${answered?.status ?? 'nothing'} after ${took} ms`);
    assert.ok(
      took >= (PHP_REQUEST_TIMEOUT_SECONDS - 1) * 1000,
      `ended after ${took} ms, not before its ${PHP_REQUEST_TIMEOUT_SECONDS} s`,
    );
    const pid = Number(readFileSync(pidFile, 'utf8'));
    assert.ok(pid > 1);
    for (let i = 0; i < 50 && isAlive(pid); i++) await new Promise((r) => setTimeout(r, 100));
    assert.equal(isAlive(pid), false, 'the runaway PHP process is gone');
    assert.equal((await until(port, cname, (r) => r?.status === 200, '/?s=after'))?.status, 200);
  });

  it('R1-R3 issue 21: a post changed after a backup is served as it was at the backup once restored; the site still serves WordPress (tree owned by the install, its wp-config.php 0640)', async () => {
    const { w, cname } = await served();
    const p = host.paths(w.install.id);
    assert.equal((await until(port, cname, (r) => r?.status === 200))?.status, 200);
    const made = await w.owner.client.post(`/v1/installs/${w.install.id}/backups`, {
      description: 'before restoring',
      notification_emails: [],
    });
    assert.equal(made.status, 202, JSON.stringify(made.body));
    await t.runJobs();
    const backup = await w.owner.client.get(`/v1/installs/${w.install.id}/backups/${made.body.id}`);
    assert.equal(backup.body.status, 'completed', JSON.stringify(backup.body));
    // The post changed after the backup (as through WordPress: its row), and served so (a query
    // string bypasses the page cache).
    await host.admin.query(
      `UPDATE \`${slugOf(w.install.id)}\`.wp_posts SET post_title = 'Changed after the backup' WHERE ID = 1`,
    );
    const changed = await until(port, cname, (r) => /Changed after the backup/.test(r?.body ?? ''), '/?p=1');
    assert.match(changed?.body ?? '', /Changed after the backup/);
    const res = await w.owner.client.post(`/v1/installs/${w.install.id}/backups/${made.body.id}/restore`, {
      notification_emails: [],
    });
    assert.equal(res.status, 202, JSON.stringify(res.body));
    await t.runJobs();
    const restore = await operationOf(w.owner.client, res);
    assert.equal(restore.status, 'completed', JSON.stringify(restore));
    const page = await until(port, cname, (r) => r?.status === 200 && /Hello world!/.test(r.body));
    assert.equal(page?.status, 200, JSON.stringify(page).slice(0, 500));
    assert.ok(page?.body.includes(w.site.name), 'the site title is on the front page');
    // R1-R3: the post as it was at the backup is served again, the change is gone.
    const post = await until(port, cname, (r) => r?.status === 200, '/?p=1');
    assert.match(post?.body ?? '', /Hello world!/);
    assert.equal(post?.body.includes('Changed after the backup'), false);
    const uid = Number(execFileSync('id', ['-u', userOf(w.install.id)], { encoding: 'utf8' }).trim());
    const config = await fs.stat(path.join(p.public, 'wp-config.php'));
    assert.equal(config.mode & 0o777, 0o640);
    assert.equal(config.uid, uid);
    assert.equal((await fs.stat(p.public)).uid, uid);
    assert.equal((await fs.stat(path.join(p.public, 'wp-content'))).uid, uid);
  });

  it('issue 21: a copy production -> staging keeps the staging wp-config.php (its own credentials) and staging still serves on its own host', async () => {
    const prod = await served();
    const stagingInstall = await f.install(prod.w.owner.client, prod.w.account.id, prod.w.site.id, 'staging');
    seen.push(stagingInstall.id);
    const to = host.paths(stagingInstall.id);
    await t.runJobs();
    const staging = await prod.w.owner.client.get(`/v1/installs/${stagingInstall.id}`);
    assert.equal(staging.body.status, 'active', JSON.stringify(staging.body));
    const stagingHost = staging.body.cname as string;
    assert.equal((await until(port, stagingHost, (r) => r?.status === 200))?.status, 200);
    const ownConfig = await fs.readFile(path.join(to.public, 'wp-config.php'), 'utf8');
    // Files and the posts (the options, with the site's URLs, stay the destination's: no URL rewrite here).
    const res = await prod.w.owner.client.post('/v1/install_copy', {
      source_environment_id: prod.w.install.id,
      destination_environment_id: stagingInstall.id,
      custom_options: { include_files: true, db_tables: ['wp_posts'] },
    });
    assert.equal(res.status, 202, JSON.stringify(res.body));
    await t.runJobs();
    const op = await operationOf(prod.w.owner.client, res);
    assert.equal(op.status, 'completed', JSON.stringify(op));
    assert.equal(await fs.readFile(path.join(to.public, 'wp-config.php'), 'utf8'), ownConfig);
    const uid = Number(execFileSync('id', ['-u', userOf(stagingInstall.id)], { encoding: 'utf8' }).trim());
    const config = await fs.stat(path.join(to.public, 'wp-config.php'));
    assert.equal(config.mode & 0o777, 0o640);
    assert.equal(config.uid, uid);
    assert.equal((await fs.stat(path.join(to.public, 'wp-content'))).uid, uid);
    const page = await until(port, stagingHost, (r) => r?.status === 200 && /Hello world!/.test(r.body));
    assert.equal(page?.status, 200, JSON.stringify(page).slice(0, 500));
  });

  it('C1-C4 (issue 21): a copy production -> staging rewrites the production URL to the staging one, inside PHP-serialized options too; staging serves the post with staging links', async () => {
    const prod = await served();
    const stagingInstall = await f.install(prod.w.owner.client, prod.w.account.id, prod.w.site.id, 'staging');
    seen.push(stagingInstall.id);
    host.paths(stagingInstall.id);
    await t.runJobs();
    const staging = await prod.w.owner.client.get(`/v1/installs/${stagingInstall.id}`);
    assert.equal(staging.body.status, 'active', JSON.stringify(staging.body));
    const prodUrl = `http://${prod.cname}:${port}`;
    const stagingUrl = `http://${staging.body.cname}:${port}`;
    // A post linking to production, and an option holding a serialized array with production's URL.
    const db = slugOf(prod.w.install.id);
    const title = `Copied post ${prod.w.install.id.slice(0, 8)}`;
    const [inserted] = (await host.admin.query(
      `INSERT INTO \`${db}\`.wp_posts (post_author, post_date, post_date_gmt, post_content, post_title, post_excerpt,
         post_status, post_name, to_ping, pinged, post_modified, post_modified_gmt, post_content_filtered, guid, post_type)
       VALUES (1, NOW(), UTC_TIMESTAMP(), ?, ?, '', 'publish', 'copied-post', '', '', NOW(), UTC_TIMESTAMP(), '', ?, 'post')`,
      [
        `<a href="${prodUrl}/about/">About</a> and <img src="//${prod.cname}:${port}/x.png">`,
        title,
        `${prodUrl}/?p=999`,
      ],
    )) as unknown as [{ insertId: number }];
    const php = (code: string, input: string) =>
      execFileSync('/usr/bin/php8.2', ['-r', code], { input, encoding: 'utf8' });
    const serialized = php(
      'echo serialize(json_decode(stream_get_contents(STDIN), true));',
      JSON.stringify({ home: prodUrl, nested: { links: [`${prodUrl}/a`, 'élan ünïcode'] }, count: 3 }),
    );
    await host.admin.query(
      `INSERT INTO \`${db}\`.wp_options (option_name, option_value, autoload) VALUES ('hp_copy_probe', ?, 'no')`,
      [serialized],
    );

    const res = await prod.w.owner.client.post('/v1/install_copy', {
      source_environment_id: prod.w.install.id,
      destination_environment_id: stagingInstall.id,
    });
    assert.equal(res.status, 202, JSON.stringify(res.body));
    await t.runJobs();
    const op = await operationOf(prod.w.owner.client, res);
    assert.equal(op.status, 'completed', JSON.stringify(op));

    // The option unserializes on staging (lengths fixed) with the staging URL, nothing else changed.
    const [rows] = (await host.admin.query(
      `SELECT option_name, option_value FROM \`${slugOf(stagingInstall.id)}\`.wp_options WHERE option_name IN ('hp_copy_probe', 'home', 'siteurl')`,
    )) as unknown as [{ option_name: string; option_value: string }[]];
    const options = Object.fromEntries(rows.map((r) => [r.option_name, r.option_value]));
    const decoded = JSON.parse(
      php('echo json_encode(unserialize(stream_get_contents(STDIN)));', String(options.hp_copy_probe)),
    );
    assert.deepEqual(decoded, {
      home: stagingUrl,
      nested: { links: [`${stagingUrl}/a`, 'élan ünïcode'] },
      count: 3,
    });
    assert.equal(options.home, stagingUrl);
    assert.equal(options.siteurl, stagingUrl);
    // The source is unchanged.
    const [source] = (await host.admin.query(
      `SELECT option_value FROM \`${db}\`.wp_options WHERE option_name = 'hp_copy_probe'`,
    )) as unknown as [{ option_value: string }[]];
    assert.equal(source[0]?.option_value, serialized);

    // Staging serves the post (on its front page, and its own page with its content's links to staging).
    const front = await until(port, staging.body.cname, (r) => r?.status === 200 && r.body.includes(title));
    assert.equal(front?.status, 200, JSON.stringify(front).slice(0, 500));
    assert.equal(front?.body.includes(prod.cname), false, 'no link to production is left');
    const page = await get(port, staging.body.cname, `/?p=${inserted.insertId}`);
    assert.equal(page?.status, 200, JSON.stringify(page).slice(0, 500));
    assert.ok(page?.body.includes(title));
    assert.ok(page?.body.includes(`${stagingUrl}/about/`), 'the post links to staging');
    assert.ok(page?.body.includes(`//${staging.body.cname}:${port}/x.png`));
    assert.equal(page?.body.includes(prod.cname), false, 'no link to production is left');
  });

  it("issue 30 (decision 244): routing applied again unchanged reloads no nginx (a reload can drop any site's request): its workers stay and the site serves; a changed routing (a name added) reloads", async () => {
    const { w, cname } = await served();
    const driver = t.app.services.driver;
    const install = { id: w.install.id as string, name: w.install.name as string, wp_version: null };
    const routing = (names: string[]) => ({
      install,
      default_name: cname,
      domains: names.map((name) => ({ name, primary: false, redirect_to: null, secure_all_urls: false })),
      certificates: [],
    });
    const apply = async (names: string[]) => {
      const done = await driver.applyRouting(
        { key: `routing-${Date.now()}-${Math.random()}`, signal: new AbortController().signal },
        routing(names),
      );
      assert.equal(done.done, true, JSON.stringify(done));
    };
    const master = Number(await fs.readFile(path.join(web, 'run', 'nginx.pid'), 'utf8'));
    const workers = () =>
      execFileSync('ps', ['-o', 'pid=', '--ppid', String(master)], { encoding: 'utf8' })
        .split('\n')
        .map((l) => l.trim())
        .filter(Boolean)
        .sort();
    await apply([]);
    const before = workers();
    assert.ok(before.length > 0, 'nginx has workers');
    await apply([]);
    assert.deepEqual(workers(), before, 'the same routing again: no reload');
    assert.equal((await until(port, cname, (r) => r?.status === 200))?.status, 200);
    const extra = `extra-${Date.now()}.example`;
    await apply([extra]);
    const after = await until(port, extra, (r) => r?.status === 200);
    assert.equal(after?.status, 200, 'the added name serves');
    assert.notDeepEqual(workers(), before, 'a changed routing reloads');
    await apply([]);
  });

  it('issue 21: the FastCGI page cache serves a cached page (HIT) until purgeCache page empties it; logged-in cookies, POSTs and query strings bypass it', async () => {
    const { w, cname } = await served();
    const db = slugOf(w.install.id);
    const first = await until(port, cname, (r) => r?.status === 200);
    assert.equal(first?.status, 200);
    const hit = await until(port, cname, (r) => r?.headers['x-cache-status'] === 'HIT');
    assert.equal(hit?.headers['x-cache-status'], 'HIT', JSON.stringify(hit?.headers));
    assert.match(hit?.body ?? '', /Hello world!/);
    // Bypassed: a query string, a logged-in cookie.
    assert.equal((await get(port, cname, '/?s=x'))?.headers['x-cache-status'], 'BYPASS');
    const cookie = { cookie: 'wordpress_logged_in_0123abcd=someone' };
    assert.equal((await get(port, cname, '/', cookie))?.headers['x-cache-status'], 'BYPASS');
    assert.ok(existsSync(path.join(web, 'cache', db)));

    // Changed in the database: the cache still answers the old page.
    await host.admin.query(
      `UPDATE \`${db}\`.wp_posts SET post_title = 'Changed behind the cache' WHERE ID = 1`,
    );
    const stale = await get(port, cname);
    assert.equal(stale?.headers['x-cache-status'], 'HIT');
    assert.match(stale?.body ?? '', /Hello world!/);
    assert.equal(stale?.body.includes('Changed behind the cache'), false);

    const res = await w.owner.client.post(`/v1/installs/${w.install.id}/purge_cache`, { type: 'page' });
    assert.equal(res.status, 202, JSON.stringify(res.body));
    await t.runJobs();
    assert.equal((await operationOf(w.owner.client, res)).status, 'completed');
    const fresh = await get(port, cname);
    assert.equal(fresh?.status, 200);
    assert.equal(fresh?.headers['x-cache-status'], 'MISS');
    assert.match(fresh?.body ?? '', /Changed behind the cache/);
  });

  // `hostplane worker` is another process on the same database: PostgreSQL only (PGlite is one process's).
  it("issue 21, decisions 251-252: hostplane worker starts nginx and PHP-FPM when absent, replaces an earlier version's one master for every pool by one per install and writes each pool as its settings make it; they outlive it and a second start adds no second nginx", {
    skip: TEST_DB !== 'postgres' && 'a second process needs PostgreSQL',
  }, async () => {
    const { w, cname } = await served();
    assert.equal((await until(port, cname, (r) => r?.status === 200))?.status, 200);
    const pidOf = async (name: string) =>
      Number(await fs.readFile(path.join(web, 'run', name), 'utf8').catch(() => '0'));
    // nginx and the install's PHP-FPM master stopped (as after a reboot): the site is down.
    for (const name of ['nginx.pid', `php-fpm.${slugOf(w.install.id)}.pid`]) {
      const pid = await pidOf(name);
      assert.ok(pid > 1, name);
      process.kill(pid, 'SIGQUIT');
    }
    assert.equal(await until(port, cname, (r) => r === null), null);
    // Decision 251: PHP-FPM as an earlier version left it: one master (run/php-fpm.pid) for the pools.
    const slug = slugOf(w.install.id);
    const legacyConf = path.join(web, 'php-fpm.conf');
    await fs.writeFile(
      legacyConf,
      `[global]\npid = ${path.join(web, 'run', 'php-fpm.pid')}\nerror_log = ${path.join(web, 'logs', 'php-fpm.log')}\ndaemonize = yes\ninclude = ${path.join(web, 'pools', `${slug}.conf`)}\n`,
    );
    execFileSync('/usr/sbin/php-fpm8.2', ['-y', legacyConf]);
    const legacyPid = await pidOf('php-fpm.pid');
    assert.ok(legacyPid > 1, "the earlier version's master started");
    const nginxMasters = async () => {
      let n = 0;
      for (const pid of await fs.readdir('/proc')) {
        if (!/^\d+$/.test(pid)) continue;
        const cmd = await fs.readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
        if (cmd.startsWith('nginx: master process') && cmd.includes(path.join(web, 'nginx.conf'))) n++;
      }
      return n;
    };
    const env = {
      ...host.env,
      LOCAL_WEB: 'on',
      HOSTING_HTTP_PORT: String(port),
      // Decision 252: a setting changed since the pools were written: the start writes them again.
      LOCAL_PHP_REQUEST_TIMEOUT_SECONDS: String(PHP_REQUEST_TIMEOUT_SECONDS + 1),
      DATABASE_URL: t.databaseUrl ?? '',
      DATA_DIR: path.join(host.root, 'worker-data'),
      HOSTPLANE_ADMIN_TOKEN: ADMIN_TOKEN,
      HOSTPLANE_SECRET_KEY: SECRET_KEY,
    };
    const startWorker = async () => {
      const run = runCli(['worker'], env);
      await run.waitFor(/Hostplane worker is running \d+ job queues/);
      return run;
    };
    const stop = async (run: Awaited<ReturnType<typeof startWorker>>) => {
      run.child.kill('SIGTERM');
      assert.equal(await run.exited, 0, run.output());
    };
    const first = await startWorker();
    const nginxPid = await pidOf('nginx.pid');
    assert.ok(nginxPid > 1);
    try {
      assert.equal((await until(port, cname, (r) => r?.status === 200))?.status, 200);
      // The earlier master is gone with its file; the install's own serves.
      assert.equal(isAlive(legacyPid), false, "the earlier version's master stopped");
      assert.equal(existsSync(legacyConf), false);
      assert.ok(isAlive(await pidOf(`php-fpm.${slug}.pid`)), "the install's own master runs");
      // Decision 252: the pool as the worker's settings make it.
      assert.match(
        readFileSync(path.join(web, 'pools', `${slug}.conf`), 'utf8'),
        new RegExp(`^request_terminate_timeout = ${PHP_REQUEST_TIMEOUT_SECONDS + 1}s$`, 'm'),
      );
    } finally {
      await stop(first);
    }
    // The worker is gone; the site still answers.
    const alone = await get(port, cname);
    assert.equal(alone?.status, 200);
    const second = await startWorker();
    try {
      assert.equal(await pidOf('nginx.pid'), nginxPid, 'the running nginx was left alone');
      assert.equal(await nginxMasters(), 1);
      assert.equal((await get(port, cname))?.status, 200);
    } finally {
      await stop(second);
    }
  });

  it("issue 21: usage from the server: the roll-up counts an install's access log into today's usage row (visits, origin requests, bytes), incrementally and after a truncation", async () => {
    // The figures are one UTC day's (the access log's times): a test that would straddle midnight
    // waits for it first (seen once in CI, at 00:00: the requests on one day, "today" the next).
    const toMidnight = 86_400_000 - (Date.now() % 86_400_000);
    if (toMidnight < 120_000) await new Promise((r) => setTimeout(r, toMidnight + 1000));
    const { w, cname } = await served();
    const log = path.join(web, 'logs', `${slugOf(w.install.id)}.access.log`);
    const responses: NonNullable<Awaited<ReturnType<typeof get>>>[] = [];
    const ask = async (urlPath: string) => {
      const r = await get(port, cname, urlPath);
      assert.ok(r, `no answer for ${urlPath}`);
      responses.push(r);
    };
    // The front page until it is served (right after a reload the old workers may still close the
    // connection, a new pool may answer 502 for a moment), then until the page cache answers it.
    // Every answer is counted (the install's log has each); a closed connection is not its.
    const front = async (done: (r: (typeof responses)[number]) => boolean) => {
      for (let i = 0; i < 40; i++) {
        const r = await get(port, cname, '/');
        if (r) responses.push(r);
        if (r && done(r)) return;
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
      assert.fail(`the front page never settled: ${JSON.stringify(responses.at(-1)?.headers)}`);
    };
    await front((r) => r.status === 200);
    await front((r) => r.headers['x-cache-status'] === 'HIT');
    for (const p of ['/?s=hello', '/wp-includes/css/dist/block-library/style.min.css']) await ask(p);
    const roll = async () => {
      await t.app.services.scheduleTrafficRoll();
      await t.runJobs();
      const res = await w.owner.client.get(`/v1/installs/${w.install.id}/usage`);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return res.body.metrics[0] as Json;
    };
    const expected = () => {
      const origin = responses.filter((r) => r.headers['x-cache-status'] !== 'HIT');
      return { requests: responses.length, origin: origin.length };
    };
    let today = await roll();
    assert.equal(today.date, new Date().toISOString().slice(0, 10));
    assert.equal(Number(today.visit_count), 1, JSON.stringify(today));
    assert.equal(Number(today.request_origin_count), expected().origin);
    assert.ok(expected().origin < expected().requests, 'some requests came from the page cache');
    const bodies = responses.reduce((n, r) => n + Buffer.byteLength(r.body), 0);
    assert.ok(Number(today.network_total_bytes) > bodies, JSON.stringify(today));
    assert.ok(Number(today.network_origin_bytes) < Number(today.network_total_bytes));
    const first = today;

    // Nothing new: the same figures (the offset moved past what was counted).
    today = await roll();
    assert.equal(today.request_origin_count, first.request_origin_count);
    assert.equal(today.network_total_bytes, first.network_total_bytes);

    // The log truncated (as a rotation by copytruncate leaves it): new lines add to the day.
    await fs.truncate(log, 0);
    await ask('/?s=after');
    today = await roll();
    assert.equal(Number(today.request_origin_count), expected().origin);
    assert.ok(Number(today.network_total_bytes) > Number(first.network_total_bytes));
    assert.equal(Number(today.visit_count), 1);
  });
});
