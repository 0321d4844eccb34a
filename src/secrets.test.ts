import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import { createSecretBox } from './secrets.js';

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
