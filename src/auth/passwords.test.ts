import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DEFAULT_HASH_COST, hashPassword, verifyPassword } from './passwords.js';

describe('password hashes (PASSWORD_HASH_COST, docs/decisions.md #120)', () => {
  it('a hash carries its own N = 2^cost (r 8, p 1); the default cost is 2^15', async () => {
    assert.equal(DEFAULT_HASH_COST, 15);
    assert.match(await hashPassword('secret', 10), /^scrypt\$1024\$8\$1\$[\w-]+\$[\w-]+$/);
    assert.match(await hashPassword('secret'), /^scrypt\$32768\$8\$1\$/);
  });

  it('hashes made at different costs verify, whatever the cost new ones are made at', async () => {
    for (const cost of [10, 15]) {
      const stored = await hashPassword('right password', cost);
      assert.equal(await verifyPassword('right password', stored), true, `cost ${cost}`);
      assert.equal(await verifyPassword('wrong password', stored), false, `cost ${cost}`);
    }
  });

  it('a malformed stored hash never verifies', async () => {
    assert.equal(await verifyPassword('x', 'bcrypt$whatever'), false);
    assert.equal(await verifyPassword('x', 'scrypt$1024$8$1$'), false);
  });
});
