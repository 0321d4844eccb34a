import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { archiveTree, ROOT, readRegular, readTreeFile, removeTree, treeBytes } from './tenant.js';

// Issue 28 (finding 9a and the tree rules): what root reads and removes itself, on a temp dir.
describe('tenant trees (local driver, issue 28)', async () => {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'tenant-unit-'));
  after(() => fs.rm(dir, { recursive: true, force: true }));
  const outside = path.join(dir, 'outside.txt');
  await fs.writeFile(outside, 'secret');

  it('readRegular answers null for a FIFO (at once, nothing blocks), a link and a directory; a regular file is read, bounded', async () => {
    const fifo = path.join(dir, 'fifo');
    execFileSync('mkfifo', [fifo]);
    assert.equal(await readRegular(fifo), null);
    await fs.symlink(outside, path.join(dir, 'link'));
    assert.equal(await readRegular(path.join(dir, 'link')), null);
    assert.equal(await readRegular(dir), null);
    assert.equal(await readRegular(path.join(dir, 'missing')), null);
    assert.equal((await readRegular(outside, 3))?.toString(), 'sec');
    // A root-owned tree (LOCAL_WEB=off): the same safe read.
    await fs.mkdir(path.join(dir, 'tree', 'wp-includes'), { recursive: true });
    execFileSync('mkfifo', [path.join(dir, 'tree', 'wp-includes', 'version.php')]);
    assert.equal(
      await readTreeFile(path.join(dir, 'tree'), 'wp-includes/version.php', AbortSignal.timeout(5000)),
      null,
    );
  });

  it('removeTree removes a tree without following its links; treeBytes counts it as du -sb does', async () => {
    const tree = path.join(dir, 'gone');
    await fs.mkdir(path.join(tree, 'a', 'b'), { recursive: true });
    await fs.writeFile(path.join(tree, 'a', 'b', 'f'), 'x'.repeat(1000));
    await fs.symlink(path.dirname(outside), path.join(tree, 'a', 'up'));
    const du = Number(execFileSync('du', ['-sb', tree], { encoding: 'utf8' }).split('\t')[0]);
    assert.equal(await treeBytes(tree, AbortSignal.timeout(5000)), du);
    await removeTree(tree);
    await assert.rejects(fs.lstat(tree), { code: 'ENOENT' });
    assert.equal(await fs.readFile(outside, 'utf8'), 'secret');
  });

  it('decision 207: a backup archive of a tree whose file changes while tar reads it completes (tar exits 1: "file changed as we read it")', async () => {
    const tree = path.join(dir, 'live');
    await fs.mkdir(tree);
    const busy = path.join(tree, 'cache.log');
    await fs.writeFile(busy, 'x'.repeat(8 << 20));
    await fs.writeFile(path.join(tree, 'index.php'), '<?php echo 1;');
    // A live site's writer: appends without pause while the archive is made.
    const writer = spawn('sh', ['-c', `while :; do echo line >> '${busy}'; done`], { stdio: 'ignore' });
    try {
      // The situation is real: tar itself says "some files differ" (exit 1) here.
      const plain = spawnSync(
        'tar',
        ['--create', '--file', path.join(dir, 'plain.tar'), '--directory', tree, '.'],
        {
          encoding: 'utf8',
        },
      );
      assert.equal(plain.status, 1, plain.stderr);
      assert.match(plain.stderr, /file changed as we read it/);
      const archive = path.join(dir, 'live.tar.gz');
      await archiveTree(ROOT, tree, archive, AbortSignal.timeout(30_000));
      const listed = execFileSync('tar', ['--list', '--gzip', '--file', archive], { encoding: 'utf8' });
      assert.match(listed, /\.\/index\.php/);
      assert.match(listed, /\.\/cache\.log/);
    } finally {
      writer.kill('SIGKILL');
    }
  });
});
