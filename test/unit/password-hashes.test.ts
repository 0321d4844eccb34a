// test/support/password-hashes.ts (the suite's scrypt memory): what it answers is what scrypt
// answers, it spares only the right password of a credential it saw made, and it can be turned off.
import './../support/password-hashes.js';
import assert from 'node:assert/strict';
import { scryptSync } from 'node:crypto';
import { describe, it } from 'node:test';
import { hashPassword, verifyPassword } from '../../src/auth/passwords.js';
import { passwordHashCounts, realPasswordHashes } from '../support/password-hashes.js';

describe('test password hashes (test/support/password-hashes.ts)', () => {
  it('stores real production-cost hashes, remembers only the right password of a hash it made', async () => {
    const stored = await hashPassword('right password');
    const [, n, r, p, salt, hash] = stored.split('$');
    const real = scryptSync('right password', Buffer.from(salt as string, 'base64url'), 32, {
      N: Number(n),
      r: Number(r),
      p: Number(p),
      maxmem: 64 * 1024 * 1024,
    });
    assert.equal(Number(n), 32768);
    assert.equal(real.toString('base64url'), hash);

    const before = passwordHashCounts();
    assert.equal(await verifyPassword('right password', stored), true);
    assert.equal(await verifyPassword('right password', stored), true);
    assert.equal(passwordHashCounts().remembered - before.remembered, 2);

    const wrong = passwordHashCounts();
    assert.equal(await verifyPassword('wrong password', stored), false);
    assert.equal(await verifyPassword('wrong password', stored), false);
    const after = passwordHashCounts();
    assert.equal(after.calls - wrong.calls, 2);
    assert.equal(after.remembered, wrong.remembered, 'a wrong password is derived at full cost every time');
  });

  it('realPasswordHashes() makes every later verification derive its key', async () => {
    const stored = await hashPassword('another password');
    realPasswordHashes();
    const before = passwordHashCounts();
    assert.equal(await verifyPassword('another password', stored), true);
    assert.equal(passwordHashCounts().remembered, before.remembered);
  });
});
