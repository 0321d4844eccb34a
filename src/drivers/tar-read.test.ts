import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { describe, it } from 'node:test';
import { DriverError } from './driver.js';
import { tarOf, tarStream } from './tar.js';
import { extractTar } from './tar-read.js';

const collect = async (stream: Readable) => {
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
};
/** Re-chunks a buffer in pieces of `size` (a header split across chunks must still parse). */
const chunked = (buf: Buffer, size: number) =>
  Readable.from(
    (function* () {
      for (let i = 0; i < buf.length; i += size) yield buf.subarray(i, i + size);
    })(),
  );
const tmp = () => fs.mkdtempSync(path.join(os.tmpdir(), 'tar-read-'));
const names = ['manifest.json', 'database.sql', 'files.tar.gz'];

describe('issue 30: a backup archive read as it arrives (drivers/tar-read.ts)', () => {
  it('extracts what tar.ts writes, byte for byte, whatever the chunking, and answers the stream SHA-256', async () => {
    const big = Buffer.alloc(3001, 7);
    const { body } = tarOf([
      { name: 'manifest.json', mtime: new Date(), content: Buffer.from('{"format":1}') },
      { name: 'database.sql', mtime: new Date(), content: Buffer.alloc(0) },
      { name: 'files.tar.gz', mtime: new Date(), content: big },
    ]);
    const whole = await collect(body);
    for (const size of [1, 511, 512, 4096, whole.length]) {
      const dir = tmp();
      const got = await extractTar(chunked(whole, size), dir, names, AbortSignal.timeout(10_000));
      assert.equal(got.sha256, createHash('sha256').update(whole).digest('hex'));
      assert.equal(got.bytes, whole.length);
      assert.deepEqual(fs.readFileSync(path.join(dir, 'files.tar.gz')), big);
      assert.equal(fs.readFileSync(path.join(dir, 'manifest.json'), 'utf8'), '{"format":1}');
      assert.equal(fs.statSync(path.join(dir, 'database.sql')).size, 0);
      assert.equal(fs.statSync(path.join(dir, 'files.tar.gz')).mode & 0o777, 0o600);
      fs.rmSync(dir, { recursive: true });
    }
  });

  it('refuses an unexpected name, a missing artefact, a truncated archive, a damaged header and a file already there (never through a link)', async () => {
    const entry = (name: string, content = Buffer.from('x')) => ({ name, mtime: new Date(), content });
    const cases: [string, Buffer][] = [
      ['unexpected', await collect(tarOf([entry('../etc/passwd')]).body)],
      ['missing', await collect(tarOf([entry('manifest.json'), entry('database.sql')]).body)],
    ];
    const full = await collect(tarOf(names.map((n) => entry(n))).body);
    cases.push(['ended early', full.subarray(0, full.length - 1024)]);
    const damaged = Buffer.from(full);
    damaged[10] = 65;
    cases.push(['checksum', damaged]);
    for (const [what, bytes] of cases) {
      const dir = tmp();
      await assert.rejects(extractTar(chunked(bytes, 100), dir, names, AbortSignal.timeout(10_000)), what);
      fs.rmSync(dir, { recursive: true });
    }
    const dir = tmp();
    fs.symlinkSync('/etc/hostname', path.join(dir, 'manifest.json'));
    await assert.rejects(
      extractTar(
        tarStream(names.map((n) => ({ ...entry(n), size: 1 }))),
        dir,
        names,
        AbortSignal.timeout(10_000),
      ),
    );
    assert.equal(fs.readlinkSync(path.join(dir, 'manifest.json')), '/etc/hostname');
    fs.rmSync(dir, { recursive: true });
  });

  it('issue 30 (decision 227): an artefact that does not match its checksum fails the archive with a final DriverError (a move carrying that backup fails at once, naming it)', async () => {
    const content = Buffer.from('not what the manifest says');
    const body = tarStream([
      {
        name: 'database.sql',
        size: content.length,
        mtime: new Date(),
        content: Readable.from([content]),
        sha256: '0'.repeat(64),
      },
    ]);
    await assert.rejects(collect(body), (err: unknown) => {
      assert.ok(err instanceof DriverError, String(err));
      assert.equal(err.final, true);
      assert.match(err.message, /database\.sql does not match its checksum/);
      return true;
    });
  });
});
