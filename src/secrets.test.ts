import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import { createResealer, createSecretBox } from './secrets.js';

describe('createSecretBox (certificate private keys at rest)', () => {
  const box = createSecretBox('a-test-secret-key-of-at-least-32-chars');
  const plaintext = Buffer.from('-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----\n');

  it('round-trips, with a fresh IV each time and no plaintext in the sealed text', () => {
    const a = box.seal(plaintext, 'row-1');
    const b = box.seal(plaintext, 'row-1');
    assert.notEqual(a, b);
    assert.match(a, /^v1\./);
    assert.ok(!a.includes('PRIVATE KEY'));
    assert.deepEqual(box.open(a, 'row-1'), plaintext);
  });

  it('refuses another context, another key and a tampered value', () => {
    const sealed = box.seal(plaintext, 'row-1');
    assert.throws(() => box.open(sealed, 'row-2'));
    assert.throws(() => createSecretBox('another-secret-key-of-at-least-32-chars').open(sealed, 'row-1'));
    const parts = sealed.split('.');
    const body = Buffer.from(parts[3] ?? '', 'base64url');
    body[0] = (body[0] ?? 0) ^ 1;
    assert.throws(() =>
      box.open([parts[0], parts[1], parts[2], body.toString('base64url')].join('.'), 'row-1'),
    );
    assert.throws(() => box.open('v1.not.sealed', 'row-1'));
  });

  it('handles binary plaintext', () => {
    const der = randomBytes(1200);
    assert.deepEqual(box.open(box.seal(der, 'x'), 'x'), der);
  });
});

describe('key rotation (createSecretBox with the old key, createResealer)', () => {
  const OLD = 'old-secret-key-0123456789abcdefghijklmn';
  const NEW = 'new-secret-key-0123456789abcdefghijklmn';

  it('a box with the old key opens values of either key and seals under the new one', () => {
    const underOld = createSecretBox(OLD).seal(Buffer.from('k'), 'ctx');
    const box = createSecretBox(NEW, OLD);
    assert.equal(box.open(underOld, 'ctx').toString(), 'k');
    const fresh = box.seal(Buffer.from('k2'), 'ctx');
    assert.equal(createSecretBox(NEW).open(fresh, 'ctx').toString(), 'k2');
    assert.throws(() => createSecretBox(NEW).open(underOld, 'ctx'));
    assert.throws(() => box.open(underOld, 'another context'));
  });

  it('the resealer moves old values, leaves new ones (null) and refuses values of neither key', () => {
    const reseal = createResealer(OLD, NEW);
    const moved = reseal(createSecretBox(OLD).seal(Buffer.from('k'), 'ctx'), 'ctx');
    assert.ok(moved);
    assert.equal(createSecretBox(NEW).open(moved, 'ctx').toString(), 'k');
    assert.equal(reseal(moved, 'ctx'), null);
    const foreign = createSecretBox('third-secret-key-0123456789abcdefghijk').seal(Buffer.from('k'), 'ctx');
    assert.throws(() => reseal(foreign, 'ctx'), /opens under neither/);
  });
});
