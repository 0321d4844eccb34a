import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decodeUtf8, findUnstorable, isStorableText } from './input.js';

describe('input guard (issue 13)', () => {
  it('storable text: no U+0000, no unpaired surrogate; pairs, RTL marks and U+FFFD are fine', () => {
    for (const ok of ['', 'abc', '\u{1F600}', '\u200F\u202E', '\uFFFD', 'שלום'])
      assert.ok(isStorableText(ok), ok);
    for (const bad of ['a\u0000', '\uD800', 'x\uDC00', '\uDC00\uD800', `${'\uD83D'}x`]) {
      assert.ok(!isStorableText(bad), JSON.stringify(bad));
    }
  });

  it('strict UTF-8: overlong, surrogate and truncated sequences are refused', () => {
    assert.equal(decodeUtf8(Buffer.from('Café ☕')), 'Café ☕');
    for (const bytes of [[0xff], [0xc0, 0xaf], [0xed, 0xa0, 0x80], [0xe2, 0x82]]) {
      assert.equal(decodeUtf8(Buffer.from(bytes)), null, JSON.stringify(bytes));
    }
  });

  it('names the first bad value or key by its G7 field path, at any depth', () => {
    assert.equal(findUnstorable({ a: 'ok', b: [1, 'x'] }), null);
    // Bytes are not walked as an object's keys (an 8 MiB archive part cost seconds: decision 208):
    // an enumerable property of the view, which a walk would report, is not looked at.
    const bytes = Buffer.alloc(1024);
    Object.defineProperty(bytes, 'marker', { value: 'a\u0000', enumerable: true });
    assert.equal(findUnstorable(bytes), null);
    assert.equal(findUnstorable({ part: bytes }), null);
    assert.deepEqual(findUnstorable({ domains: [{ name: 'ok' }, { name: 'a\u0000' }] }), {
      field: 'domains[1].name',
      kind: 'string',
    });
    assert.deepEqual(findUnstorable({ 'k\u0000': 1 }), { field: 'k\u0000', kind: 'string' });
    assert.deepEqual(findUnstorable({ limit: Number.POSITIVE_INFINITY }), { field: 'limit', kind: 'number' });
    let deep: unknown = 'a\uD800';
    for (let i = 0; i < 100_000; i++) deep = [deep];
    assert.equal(findUnstorable(deep)?.kind, 'string', 'no stack overflow on deep nesting');
  });
});
