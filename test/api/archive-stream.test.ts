// test-db: postgres (the subject is the local driver's archive download, not the control plane's database)
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fs from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { describe, it } from 'node:test';
import { factories } from '../support/factories.js';
import { buildTestApp, type Json } from '../support/harness.js';
import { readyWorld } from '../support/jobs.js';
import { localHosting } from '../support/local-hosting.js';

// Issue 28 finding 9b: an archive download is a stream (DriverFile.body a Readable with its size),
// never the backup in memory. The backup's files archive is replaced by a sparse file of
// ARCHIVE_TEST_BYTES (test/README.md: 600 MB in `npm test`, 3 GiB for the long run), and a client
// reads the download over a real socket while the serving process's RSS is sampled.
const BYTES = Number(process.env.ARCHIVE_TEST_BYTES ?? 600_000_000);
/** How far the serving process's RSS may rise while the archive streams. */
const RSS_BOUND = 100 * 1024 * 1024;
const host = await localHosting();
const t = await buildTestApp({ env: { ...host.env, PUBLIC_URL: 'https://api.hostplane.test' } });
const f = factories(t);
await t.app.listen({ host: '127.0.0.1', port: 0 });
const port = (t.app.server.address() as AddressInfo).port;

const pad = (n: number) => (512 - (n % 512)) % 512;

/** SHA-256 of `bytes` zero bytes (a sparse file's content), hashed in 1 MiB steps. */
function zerosSha256(bytes: number): string {
  const hash = createHash('sha256');
  const chunk = Buffer.alloc(1024 * 1024);
  let left = bytes;
  while (left > 0) {
    const n = Math.min(left, chunk.length);
    hash.update(n === chunk.length ? chunk : chunk.subarray(0, n));
    left -= n;
  }
  return hash.digest('hex');
}

/** A completed local backup of a fresh install: its directory and its archive's download path. */
async function backupWithArchive() {
  const w = await readyWorld(t, f);
  const res = await w.owner.client.post(`/v1/installs/${w.install.id}/backups`, {
    description: 'archive stream',
    notification_emails: [],
  });
  assert.equal(res.status, 202, JSON.stringify(res.body));
  await t.runJobs();
  const list = await w.owner.client.get(`/v1/installs/${w.install.id}/archives`);
  const archive = list.body.results.find((a: Json) => a.id === res.body.id);
  assert.ok(archive?.download_uri, JSON.stringify(list.body));
  const backups = host.paths(w.install.id).backups;
  const [name] = (await fs.readdir(backups)).filter((n) => !n.startsWith('.'));
  assert.ok(name, 'the backup directory');
  const dir = path.join(backups, name);
  return { dir, url: new URL(archive.download_uri).pathname + new URL(archive.download_uri).search };
}

/** Reads `url` from the listening app; the bytes are counted and hashed by range, never kept. */
function download(url: string, ranges: { from: number; to: number }[]) {
  return new Promise<{
    status: number;
    headers: http.IncomingHttpHeaders;
    count: number;
    hashes: string[];
    aborted: boolean;
    slices: Buffer[];
  }>((resolve, reject) => {
    const hashes = ranges.map(() => createHash('sha256'));
    const slices = ranges.map(() => [] as Buffer[]);
    let count = 0;
    const req = http.get({ host: '127.0.0.1', port, path: url }, (res) => {
      let aborted = false;
      let settled = false;
      res.on('data', (chunk: Buffer) => {
        ranges.forEach((r, i) => {
          const from = Math.max(r.from - count, 0);
          const to = Math.min(r.to - count, chunk.length);
          if (to > from) {
            hashes[i]?.update(chunk.subarray(from, to));
            // Small ranges (headers) are kept to read them.
            if (r.to - r.from <= 4096) slices[i]?.push(Buffer.from(chunk.subarray(from, to)));
          }
        });
        count += chunk.length;
      });
      res.on('aborted', () => {
        aborted = true;
      });
      const done = () => {
        if (settled) return;
        settled = true;
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          count,
          hashes: hashes.map((h) => h.digest('hex')),
          aborted,
          slices: slices.map((s) => Buffer.concat(s)),
        });
      };
      res.on('end', done);
      res.on('close', () => {
        if (!res.complete) aborted = true;
        done();
      });
      res.on('error', () => {
        aborted = true;
        done();
      });
    });
    req.on('error', reject);
  });
}

describe('issue 28 finding 9b: archive downloads stream', () => {
  it(`issue 28 finding 9b: a ${Math.round(BYTES / 1e6)} MB backup downloads whole (count and checksums) with the serving process's RSS within +100 MB, as an uncompressed tar with its Content-Length`, async () => {
    const { dir, url } = await backupWithArchive();
    // The files archive becomes a sparse file of BYTES zeros; the manifest says so.
    const filesArchive = path.join(dir, 'files.tar.gz');
    await fs.rm(filesArchive);
    const handle = await fs.open(filesArchive, 'w', 0o600);
    await handle.truncate(BYTES);
    await handle.close();
    const manifestFile = path.join(dir, 'manifest.json');
    const manifest = JSON.parse(await fs.readFile(manifestFile, 'utf8'));
    manifest.files.sha256 = zerosSha256(BYTES);
    manifest.files.archive_bytes = BYTES;
    await fs.writeFile(manifestFile, JSON.stringify(manifest));
    const manifestBytes = (await fs.stat(manifestFile)).size;
    const dumpBytes = (await fs.stat(path.join(dir, 'database.sql'))).size;
    const dumpSha = createHash('sha256')
      .update(await fs.readFile(path.join(dir, 'database.sql')))
      .digest('hex');
    // The layout of the tar: manifest.json, database.sql, files.tar.gz, each a header and padded content.
    const dumpAt = 512 + manifestBytes + pad(manifestBytes) + 512;
    const filesHeaderAt = dumpAt + dumpBytes + pad(dumpBytes);
    const filesAt = filesHeaderAt + 512;
    const total = filesAt + BYTES + pad(BYTES) + 1024;

    global.gc?.();
    const baseline = process.memoryUsage().rss;
    let peak = baseline;
    const sampler = setInterval(() => {
      peak = Math.max(peak, process.memoryUsage().rss);
    }, 25);
    let res: Awaited<ReturnType<typeof download>>;
    try {
      res = await download(url, [
        { from: dumpAt, to: dumpAt + dumpBytes },
        { from: filesHeaderAt, to: filesHeaderAt + 100 },
        { from: filesAt, to: filesAt + BYTES },
      ]);
    } finally {
      clearInterval(sampler);
    }
    assert.equal(res.status, 200);
    const rise = peak - baseline;
    assert.ok(rise < RSS_BOUND, `RSS rose ${Math.round(rise / 1e6)} MB while ${BYTES} bytes streamed`);
    assert.equal(res.headers['content-type'], 'application/x-tar');
    assert.match(String(res.headers['content-disposition']), /\.tar"$/);
    assert.equal(Number(res.headers['content-length']), total);
    assert.equal(res.aborted, false);
    assert.equal(res.count, total, 'every byte arrived');
    assert.equal(res.hashes[0], dumpSha, 'the database dump arrives as it is');
    assert.match(res.slices[1]?.toString('latin1') ?? '', /^files\.tar\.gz\0/);
    assert.equal(res.hashes[2], manifest.files.sha256, 'the files archive arrives whole');
    t.app.log.info({ rise, bytes: BYTES }, 'archive stream');
    console.log(`# archive stream: ${BYTES} bytes, RSS rise ${Math.round(rise / 1e6)} MB`);
  });

  it('issue 28 finding 9b: an artefact that does not match its checksum ends the download short of its Content-Length (never a complete-looking wrong archive)', async () => {
    const { dir, url } = await backupWithArchive();
    const manifestFile = path.join(dir, 'manifest.json');
    const manifest = JSON.parse(await fs.readFile(manifestFile, 'utf8'));
    manifest.database.sha256 = '0'.repeat(64);
    await fs.writeFile(manifestFile, JSON.stringify(manifest));
    const res = await download(url, []);
    assert.equal(res.status, 200);
    assert.ok(
      res.aborted || res.count < Number(res.headers['content-length']),
      `${res.count} of ${res.headers['content-length']} bytes, aborted ${res.aborted}`,
    );
  });
});
