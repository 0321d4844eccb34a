import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  diffIndex,
  expectedOf,
  indexFromRows,
  indexRows,
  parseIndex,
  sameIndex,
  type TreeEntry,
  type TreeIndex,
  treeMismatch,
} from './tree-index.js';

const file = (size: number, mtime = '100.5', extra: Partial<TreeEntry> = {}): TreeEntry => ({
  type: 'f',
  size,
  mtime,
  ctime: mtime,
  mode: '644',
  link: '',
  ...extra,
});
const dir = (mtime = '100.5', mode = '755'): TreeEntry => ({
  type: 'd',
  size: 4096,
  mtime,
  ctime: mtime,
  mode,
  link: '',
});
const link = (to: string): TreeEntry => ({
  type: 'l',
  size: to.length,
  mtime: '1',
  ctime: '1',
  mode: '777',
  link: to,
});
const tree = (entries: Record<string, TreeEntry>): TreeIndex => new Map(Object.entries(entries));

describe('issue 30 (decision #235): a move final sync takes only what changed since the copy', () => {
  it("issue 30: find's NUL-ended output parses, names with newlines and a leading dash included", () => {
    const out = [
      ['f', '12', '1795879220.8494210810', '1795879220.9', '644', '', 'a/b\nc'],
      ['l', '11', '1.0', '2.0', '777', '/etc/passwd', '-link'],
      ['d', '4096', '3.0', '3.0', '755', '', 'a'],
    ]
      .map((fields) => `${fields.join('\0')}\0`)
      .join('');
    const index = parseIndex(out);
    assert.deepEqual([...index.keys()], ['a/b\nc', '-link', 'a']);
    assert.deepEqual(index.get('-link'), {
      type: 'l',
      size: 11,
      mtime: '1.0',
      ctime: '2.0',
      mode: '777',
      link: '/etc/passwd',
    });
    assert.ok(sameIndex(indexFromRows(JSON.parse(JSON.stringify(indexRows(index)))), index));
    assert.equal(parseIndex('').size, 0);
  });

  it('issue 30: new, changed (size, mtime, ctime only: an mtime set back, mode, link target), retyped entries and directories whose mode changed are sent; gone ones removed, a gone tree by its top only', () => {
    const base = tree({
      same: file(10),
      grown: file(10),
      touched: file(10),
      backdated: file(10),
      chmodded: file(10),
      relinked: link('a'),
      'was-dir': dir(),
      'was-dir/inner': file(1),
      'was-file': file(3),
      gone: file(1),
      'gone-tree': dir(),
      'gone-tree/sub': dir(),
      'gone-tree/sub/f': file(1),
      kept: dir(),
      locked: dir(),
    });
    const now = tree({
      same: file(10),
      grown: file(11),
      touched: file(10, '200.1'),
      backdated: file(10, '100.5', { ctime: '300.2' }),
      chmodded: file(10, '100.5', { mode: '600' }),
      relinked: link('b'),
      'was-dir': file(5),
      'was-file': dir(),
      'was-file/new': file(2),
      kept: dir('999.9'),
      'kept/new': file(4),
      locked: dir('100.5', '700'),
    });
    const { send, remove } = diffIndex(base, now);
    assert.deepEqual(send, [
      'backdated',
      'chmodded',
      'grown',
      'kept/new',
      'locked',
      'relinked',
      'touched',
      'was-dir',
      'was-file',
      'was-file/new',
    ]);
    // A directory whose only change is its own times (entries came and went) is not sent.
    assert.ok(!send.includes('kept'));
    assert.deepEqual(remove, ['gone', 'gone-tree', 'was-dir', 'was-file']);
    assert.deepEqual(diffIndex(now, now), { send: [], remove: [] });
  });

  it('issue 30: the target is checked entry by entry against the source: missing, retyped, resized, re-dated, relinked and extra entries are named; FIFOs and the ignored paths are not compared', () => {
    const source = tree({
      a: file(10, '100.9'),
      d: dir(),
      'd/l': link('x'),
      fifo: { ...file(0), type: 'p' },
      'wp-config.php': file(100),
    });
    const expected = expectedOf(source);
    assert.deepEqual(
      expected.map((e) => e[0]),
      ['a', 'd', 'd/l', 'wp-config.php'],
    );
    const ignore = new Set(['wp-config.php']);
    // tar keeps whole seconds: 100.9 on the source is 100 on the target.
    const target = tree({ a: file(10, '100'), d: dir('5'), 'd/l': link('x'), 'wp-config.php': file(7) });
    assert.deepEqual(treeMismatch(expected, target, ignore), []);
    assert.deepEqual(
      treeMismatch(expected, tree({ ...Object.fromEntries(target), a: file(9, '100') }), ignore),
      ['"a" holds 9 bytes, not 10'],
    );
    assert.deepEqual(
      treeMismatch(expected, tree({ ...Object.fromEntries(target), a: file(10, '101') }), ignore),
      ['"a" was modified at 101, not 100'],
    );
    assert.deepEqual(
      treeMismatch(expected, tree({ ...Object.fromEntries(target), 'd/l': link('y') }), ignore),
      ['"d/l" links to "y", not "x"'],
    );
    assert.deepEqual(treeMismatch(expected, tree({ ...Object.fromEntries(target), a: dir() }), ignore), [
      '"a" is a d, not a f',
    ]);
    const without = tree(Object.fromEntries(target));
    without.delete('d/l');
    without.set('extra', file(1));
    assert.deepEqual(treeMismatch(expected, without, ignore), [
      '"d/l" is missing',
      '"extra" is there and should not be',
    ]);
    assert.equal(treeMismatch(expected, tree({}), ignore, 2).length, 2);
  });
});
