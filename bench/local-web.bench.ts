/**
 * `npm run bench:local-web [-- --installs N --files-mb F --db-mb D --seconds S]` (issue 21): the local
 * driver's web tier on this machine, each figure next to a baseline of the same run.
 *
 * 1. Provisioning a WordPress install to the first 200 from nginx: p50/p90 over N installs (goal p50 < 10 s);
 *    meanwhile the first install's uncached PHP page asked every 50 ms, each on a connection of its own (its latency and failures while
 *    the others are provisioned, against the same requests with nothing provisioned: decision 251), and
 *    the private memory of the PHP-FPM masters afterwards.
 * 2. A page from nginx's FastCGI cache vs a static file from the same nginx, autocannon (goal >= 50%).
 * 3. Backup of a site with F MB of files and D MB of database vs `tar czf` + `mariadb-dump` by hand
 *    (goal within 1.25x).
 *
 * It drives the local driver itself (createLocalDriver, as the worker does) on an in-memory PGlite and
 * the machine's MariaDB (MARIADB_URL, default root@127.0.0.1:3306), as root, with nginx on a free port;
 * everything it made is removed at the end. Writes bench/results/local-web.{md,json}.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import fs from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import mysql from 'mysql2/promise';
import { systemClock } from '../src/clock.js';
import { openDatabase } from '../src/db/client.js';
import { migrateDatabase } from '../src/db/migrate.js';
import type { HostingDriver, InstallRef } from '../src/drivers/driver.js';
import { createMariaDb } from '../src/drivers/local/database.js';
import { createLocalDriver } from '../src/drivers/local/driver.js';
import { createSecretBox } from '../src/secrets.js';
import { freePort, percentile, run } from './load.js';

const { values: args } = parseArgs({
  options: {
    installs: { type: 'string', default: '20' },
    'files-mb': { type: 'string', default: '1024' },
    'db-mb': { type: 'string', default: '200' },
    seconds: { type: 'string', default: '10' },
    // off: provisioning alone (no neighbour's requests competing for the CPU).
    neighbour: { type: 'string', default: 'on' },
  },
});
const INSTALLS = Number(args.installs);
const FILES_MB = Number(args['files-mb']);
const DB_MB = Number(args['db-mb']);
const SECONDS = Number(args.seconds);
const MARIADB_URL = process.env.MARIADB_URL ?? 'mysql://root@127.0.0.1:3306';
const DOMAIN = 'bench.hostplane.test';

/**
 * A GET's status, null when the connection ended without an answer. `fresh`: on a connection of its
 * own (a kept-alive one that nginx's reload closes as the request is sent fails on the client's side,
 * which a browser retries: not the server's answer).
 */
function get(port: number, host: string, urlPath = '/', fresh = false): Promise<number | null> {
  return new Promise((resolve) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        path: urlPath,
        headers: { host: `${host}:${port}` },
        ...(fresh ? { agent: false } : {}),
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', () => resolve(null));
    req.end();
  });
}

const seconds = (ms: number) => Math.round(ms / 10) / 100;

async function main() {
  if (process.getuid?.() !== 0) throw new Error('run as root (system users, chown)');
  const root = await fs.mkdtemp(path.join(os.tmpdir(), 'hostplane-bench-web-'));
  const port = await freePort();
  const database = await openDatabase({ kind: 'pglite-memory' });
  await migrateDatabase(database);
  const mariadb = createMariaDb(MARIADB_URL);
  const driver = createLocalDriver({
    db: database.db,
    clock: systemClock,
    secretBox: createSecretBox(randomBytes(32).toString('base64url')),
    mariadb,
    hostingRoot: root,
    maxHeavy: 2,
    web: { httpPort: port, httpsPort: await freePort(), installDomain: DOMAIN },
    // Not ordered in this bench.
    acme: { directoryUrl: 'https://acme.invalid/directory', email: null, caBundleFile: null },
  }) as HostingDriver;
  const made: InstallRef[] = [];
  const call = () => ({ key: randomUUID(), signal: AbortSignal.timeout(600_000) });
  const load = os
    .loadavg()
    .map((n) => n.toFixed(1))
    .join(' ');
  const results: Record<string, unknown> = { date: new Date().toISOString(), loadavg_at_start: load };

  // Decision 251: the first install's uncached page (a search) asked every 50 ms while `busy`.
  const neighbour = async (host: string, until: () => boolean) => {
    const latencies: number[] = [];
    let failed = 0;
    // What the failures were: a status, or `closed` (the connection ended without an answer).
    const kinds: Record<string, number> = {};
    while (!until()) {
      const t0 = performance.now();
      const status = await get(port, host, `/?s=n${randomBytes(4).toString('hex')}`, true);
      if (status === 200) latencies.push(performance.now() - t0);
      else {
        failed++;
        kinds[String(status ?? 'closed')] = (kinds[String(status ?? 'closed')] ?? 0) + 1;
      }
      await new Promise((res) => setTimeout(res, 50));
    }
    latencies.sort((a, b) => a - b);
    const ms = (q: number) => Math.round(percentile(latencies, q));
    return {
      requests: latencies.length + failed,
      failed,
      kinds,
      p50_ms: ms(0.5),
      p99_ms: ms(0.99),
      max_ms: ms(1),
    };
  };
  try {
    // 1. Provisioning to the first 200.
    const times: number[] = [];
    let provisioning = true;
    let neighbourRun: ReturnType<typeof neighbour> | null = null;
    for (let i = 0; i < INSTALLS; i++) {
      if (i === 1 && args.neighbour !== 'off') {
        // The same requests with nothing else running, for 10 s (or one provisioning if longer).
        const host0 = `${(made[0] as InstallRef).name}.${DOMAIN}`;
        const quietEnd = performance.now() + Math.max(10_000, times[0] as number);
        results.neighbour_quiet = await neighbour(host0, () => performance.now() > quietEnd);
        neighbourRun = neighbour(host0, () => !provisioning);
      }
      const install: InstallRef = {
        id: randomUUID(),
        name: `b${i}x${randomBytes(3).toString('hex')}`,
        wp_version: null,
      };
      made.push(install);
      const start = performance.now();
      const r = await driver.provision(call(), install);
      if (!r.done) throw new Error('provision did not finish');
      let status: number | null = null;
      while (status !== 200) {
        status = await get(port, `${install.name}.${DOMAIN}`);
        if (status !== 200) await new Promise((res) => setTimeout(res, 50));
      }
      times.push(performance.now() - start);
      process.stdout.write(`provision ${i + 1}/${INSTALLS}: ${seconds(times.at(-1) as number)} s\n`);
    }
    provisioning = false;
    if (neighbourRun) results.neighbour_busy = await neighbourRun;
    results.fpm_masters = await fpmMasters(root);
    process.stdout.write(
      `neighbour: quiet ${JSON.stringify(results.neighbour_quiet)}, while provisioning ${JSON.stringify(results.neighbour_busy)}; masters ${JSON.stringify(results.fpm_masters)}\n`,
    );
    const sorted = [...times].sort((a, b) => a - b);
    results.provision = {
      installs: INSTALLS,
      p50_s: seconds(percentile(sorted, 0.5)),
      p90_s: seconds(percentile(sorted, 0.9)),
      max_s: seconds(sorted.at(-1) as number),
    };

    // 2. Cached page vs static file, same nginx, same host.
    const first = made[0] as InstallRef;
    const host = `${first.name}.${DOMAIN}`;
    const publicDir = path.join(root, 'installs', `hp_${first.id.replace(/-/g, '')}`, 'public');
    await get(port, host, '/');
    await get(port, host, '/');
    const page = await run(`http://127.0.0.1:${port}/`, { host: `${host}:${port}` }, SECONDS, 20);
    const staticFile = await run(
      `http://127.0.0.1:${port}/wp-includes/css/dist/block-library/style.min.css`,
      { host: `${host}:${port}` },
      SECONDS,
      20,
    );
    const rps = (r: Awaited<ReturnType<typeof run>>) => Math.round(r.latenciesMs.length / r.seconds);
    results.cache = {
      cached_page_rps: rps(page),
      static_file_rps: rps(staticFile),
      ratio: Math.round((rps(page) / rps(staticFile)) * 100) / 100,
      non2xx: page.non2xx + staticFile.non2xx,
      page_bytes: (await fs.stat(path.join(publicDir, 'wp-includes/css/dist/block-library/style.min.css')))
        .size,
    };
    process.stdout.write(`cache: ${JSON.stringify(results.cache)}\n`);

    // 3. Backup vs tar czf + mariadb-dump by hand.
    const uploads = path.join(publicDir, 'wp-content', 'uploads', 'bench');
    await fs.mkdir(uploads, { recursive: true });
    // Half incompressible, half text-like (as a site's media and its text files).
    for (let mb = 0; mb < FILES_MB; mb += 8) {
      const chunk = mb % 16 === 0 ? randomBytes(8 << 20) : Buffer.from('wordpress '.repeat((8 << 20) / 10));
      await fs.writeFile(path.join(uploads, `f${mb}.bin`), chunk);
    }
    execFileSync('chown', ['-R', `hp${first.id.replace(/-/g, '').slice(0, 30)}:`, uploads]);
    const admin = await mysql.createConnection(MARIADB_URL);
    const dbName = `hp_${first.id.replace(/-/g, '')}`;
    await admin.query(
      `CREATE TABLE \`${dbName}\`.bench (id INT AUTO_INCREMENT PRIMARY KEY, body MEDIUMTEXT)`,
    );
    const row = randomBytes(48 << 10).toString('base64'); // ~64 KB of text a row
    for (let done = 0; done < DB_MB * 16; done += 16)
      await admin.query(
        `INSERT INTO \`${dbName}\`.bench (body) VALUES ${Array(16).fill('(?)').join(',')}`,
        Array(16).fill(row),
      );
    await admin.end();
    execFileSync('sync');
    const t0 = performance.now();
    const b = await driver.backup(call(), first);
    if (!b.done) throw new Error('backup did not finish');
    const ours = performance.now() - t0;
    const byHand = path.join(root, 'by-hand');
    await fs.mkdir(byHand);
    execFileSync('sync');
    const t1 = performance.now();
    execFileSync('tar', ['czf', path.join(byHand, 'site.tar.gz'), '-C', publicDir, '.']);
    const url = new URL(MARIADB_URL);
    execFileSync(
      'sh',
      [
        '-c',
        `mariadb-dump --host "$1" --port "$2" --user "$3" --single-transaction --hex-blob "$4" > "$5"`,
        'sh',
        url.hostname,
        url.port || '3306',
        decodeURIComponent(url.username || 'root'),
        dbName,
        path.join(byHand, 'db.sql'),
      ],
      { env: { PATH: '/usr/bin:/bin', MYSQL_PWD: decodeURIComponent(url.password) } },
    );
    const hand = performance.now() - t1;
    results.backup = {
      files_mb: FILES_MB,
      database_mb: DB_MB,
      hostplane_s: seconds(ours),
      by_hand_s: seconds(hand),
      ratio: Math.round((ours / hand) * 100) / 100,
    };
    process.stdout.write(`backup: ${JSON.stringify(results.backup)}\n`);
  } finally {
    for (const install of made) await driver.deprovision(call(), install).catch(() => undefined);
    const pids = await fs.readdir(path.join(root, 'web', 'run')).catch(() => [] as string[]);
    for (const pid of pids.filter((n) => /^(nginx|php-fpm.*)\.pid$/.test(n))) {
      const n = Number(await fs.readFile(path.join(root, 'web', 'run', pid), 'utf8').catch(() => '0'));
      if (n > 1) process.kill(n, 'SIGQUIT');
    }
    await driver.close?.();
    await database.close();
    await fs.rm(root, { recursive: true, force: true });
  }
  results.loadavg_at_end = os
    .loadavg()
    .map((n) => n.toFixed(1))
    .join(' ');
  const dir = path.join('bench', 'results');
  await fs.writeFile(path.join(dir, 'local-web.json'), `${JSON.stringify(results, null, 2)}\n`);
  const p = results.provision as Record<string, number>;
  const c = results.cache as Record<string, number>;
  const k = results.backup as Record<string, number>;
  const q = results.neighbour_quiet as Awaited<ReturnType<typeof neighbour>> | undefined;
  const n = results.neighbour_busy as Awaited<ReturnType<typeof neighbour>> | undefined;
  const m = results.fpm_masters as Record<string, number>;
  const md = `# bench:local-web (issue 21), ${results.date}

Load average at start / end: ${results.loadavg_at_start} / ${results.loadavg_at_end} (2 cores).

| what | measured | baseline (same run) | ratio | goal |
|---|---|---|---|---|
| provisioning to first 200, ${p.installs} installs | p50 ${p.p50_s} s, p90 ${p.p90_s} s (max ${p.max_s} s) | | | p50 < 10 s |
| the first install's uncached page every 50 ms while the others are provisioned | p50 ${n?.p50_ms} ms, p99 ${n?.p99_ms} ms, max ${n?.max_ms} ms, ${n?.failed} of ${n?.requests} failed ${JSON.stringify(n?.kinds)} | nothing provisioned: p50 ${q?.p50_ms} ms, p99 ${q?.p99_ms} ms, max ${q?.max_ms} ms, ${q?.failed} of ${q?.requests} failed | max ${n && q ? Math.round((n.max_ms / q.max_ms) * 100) / 100 : ''} | no failure |
| PHP-FPM masters after provisioning | ${m.masters} masters, ${m.private_mb} MB private memory in all | | | |
| cached WordPress page (FastCGI cache HIT) | ${c.cached_page_rps} req/s | static file ${c.static_file_rps} req/s | ${c.ratio} | >= 0.5 |
| backup, ${k.files_mb} MB files + ${k.database_mb} MB database | ${k.hostplane_s} s | tar czf + mariadb-dump ${k.by_hand_s} s | ${k.ratio} | <= 1.25 |
`;
  await fs.writeFile(path.join(dir, 'local-web.md'), md);
  process.stdout.write(md);
}

/** The PHP-FPM masters serving `root`'s pools: how many, and their private memory (RssAnon) in all. */
async function fpmMasters(root: string) {
  let masters = 0;
  let kb = 0;
  for (const pid of await fs.readdir('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    const cmd = await fs.readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
    if (!cmd.startsWith('php-fpm: master process') || !cmd.includes(root)) continue;
    const status = await fs.readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
    masters++;
    kb += Number(/^RssAnon:\s+(\d+)/m.exec(status)?.[1] ?? 0);
  }
  return { masters, private_mb: Math.round(kb / 102.4) / 10 };
}

await main();
