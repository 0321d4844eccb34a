import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { expectFieldError } from '../support/assertions.js';
import { factories } from '../support/factories.js';
import { buildTestApp, type Json } from '../support/harness.js';
import { expectBadCredentials, expectNotFound } from '../support/security.js';
import { sshKeygenFingerprint, type TestKeyKind, testSshKey } from '../support/ssh-keys.js';

const t = await buildTestApp();
const f = factories(t);

async function member() {
  const account = await f.account();
  return f.user([{ account_id: account.id, roles: 'partial', install_ids: [] }]);
}

describe('createSshKey', () => {
  const kinds: TestKeyKind[] = ['ed25519', 'p256', 'p384', 'p521', 'rsa2048', 'rsa3072'];
  for (const kind of kinds) {
    it(`K1 registers a generated ${kind} key: 201 with the fingerprint ssh-keygen -l prints and the comment`, async () => {
      const u = await member();
      const key = testSshKey(kind, `${kind} laptop`);
      const res = await u.client.post('/v1/ssh_keys', { public_key: key.line });
      assert.equal(res.status, 201, JSON.stringify(res.body));
      assert.deepEqual(Object.keys(res.body).sort(), ['comment', 'created_at', 'fingerprint', 'uuid']);
      assert.equal(res.body.fingerprint, sshKeygenFingerprint(key.line).fingerprint);
      assert.equal(res.body.comment, `${kind} laptop`);
      assert.equal(res.body.created_at, t.clock.now().toISOString());
    });
  }

  it('K1 keeps a comment with spaces, and an empty one when the line has none', async () => {
    const u = await member();
    const spaced = await u.client.post('/v1/ssh_keys', {
      public_key: testSshKey('ed25519', 'joe @ work laptop').line,
    });
    assert.equal(spaced.body.comment, 'joe @ work laptop');
    const bare = await u.client.post('/v1/ssh_keys', { public_key: testSshKey('p256', '').line });
    assert.equal(bare.status, 201);
    assert.equal(bare.body.comment, '');
  });

  it('K1 refuses a 1024-bit RSA key with a field error (key_too_short)', async () => {
    const u = await member();
    expectFieldError(
      await u.client.post('/v1/ssh_keys', { public_key: testSshKey('rsa1024').line }),
      'public_key',
      undefined,
      'key_too_short',
      { resource: 'ssh_key', only: true },
    );
  });

  it('K1 refuses truncated key data of each type with a field error', async () => {
    const u = await member();
    for (const kind of ['ed25519', 'p384', 'rsa2048'] as const) {
      const key = testSshKey(kind);
      const cut = key.blob.subarray(0, key.blob.length - 7).toString('base64');
      const res = await u.client.post('/v1/ssh_keys', { public_key: `${key.type} ${cut} x` });
      expectFieldError(res, 'public_key', undefined, 'truncated_public_key', {
        resource: 'ssh_key',
        only: true,
      });
    }
  });

  it('K1 refuses malformed keys: bad base64, unknown type, a mismatched blob, an empty value', async () => {
    const u = await member();
    const ed = testSshKey('ed25519');
    const post = (public_key: string) => u.client.post('/v1/ssh_keys', { public_key });
    expectFieldError(await post('ssh-ed25519 not*base64'), 'public_key', undefined, 'malformed_public_key', {
      resource: 'ssh_key',
      only: true,
    });
    expectFieldError(await post('just-one-token'), 'public_key', undefined, 'malformed_public_key', {
      resource: 'ssh_key',
      only: true,
    });
    expectFieldError(
      await post(ed.line.replace('ssh-ed25519', 'ssh-dss')),
      'public_key',
      undefined,
      'unsupported_key_type',
      { resource: 'ssh_key', only: true },
    );
    expectFieldError(
      await post(ed.line.replace('ssh-ed25519', 'ecdsa-sha2-nistp256')),
      'public_key',
      undefined,
      'key_type_mismatch',
      { resource: 'ssh_key', only: true },
    );
    const empty = await post('');
    assert.equal(empty.status, 400);
    assert.equal(empty.body.errors[0].field, 'public_key');
    const missing = await u.client.post('/v1/ssh_keys', {});
    assert.equal(missing.status, 400);
    assert.equal(missing.body.errors[0].code, 'required');
  });

  it('K1 a key already registered, by the same or another user, is 400 value_unavailable', async () => {
    const u = await member();
    const other = await member();
    const key = testSshKey('ed25519', 'first');
    assert.equal((await u.client.post('/v1/ssh_keys', { public_key: key.line })).status, 201);
    // The same key with another comment is the same key.
    const again = await u.client.post('/v1/ssh_keys', {
      public_key: `${key.type} ${key.blob.toString('base64')} second`,
    });
    assert.equal(again.status, 400);
    assert.equal(again.body.errors[0].type, 'value_unavailable');
    assert.equal(again.body.errors[0].code, 'key_registered');
    const elsewhere = await other.client.post('/v1/ssh_keys', { public_key: key.line });
    assert.equal(elsewhere.status, 400);
    assert.equal(elsewhere.body.errors[0].type, 'value_unavailable');
  });

  it('G2 needs credentials', async () => {
    expectBadCredentials(await t.anonymous.post('/v1/ssh_keys', { public_key: testSshKey().line }));
  });
});

describe('listSshKeys', () => {
  it('K1 lists only the caller’s keys in the G6 envelope, oldest first, paged by limit and offset', async () => {
    const u = await member();
    const other = await member();
    await other.client.post('/v1/ssh_keys', { public_key: testSshKey().line });
    const made: Json[] = [];
    for (const kind of ['ed25519', 'p256', 'rsa2048'] as const) {
      t.clock.advance(1000);
      made.push((await u.client.post('/v1/ssh_keys', { public_key: testSshKey(kind).line })).body);
    }
    const all = await u.client.get('/v1/ssh_keys');
    assert.equal(all.status, 200);
    assert.equal(all.body.count, 3);
    assert.deepEqual(all.body.results, made);
    assert.equal(all.body.next, null);
    assert.equal(all.body.previous, null);
    const page = await u.client.get('/v1/ssh_keys?limit=1&offset=1');
    assert.deepEqual(page.body.results, [made[1]]);
    assert.match(page.body.next, /^http:\/\/[^/]+\/v1\/ssh_keys\?limit=1&offset=2$/);
    assert.match(page.body.previous, /^http:\/\/[^/]+\/v1\/ssh_keys\?limit=1&offset=0$/);
    const bad = await u.client.get('/v1/ssh_keys?limit=101');
    assert.equal(bad.status, 400);
  });
});

describe('deleteSshKey', () => {
  it('K1 deletes the caller’s key (204), after which it is gone and can be registered again', async () => {
    const u = await member();
    const key = testSshKey('p521');
    const created = await u.client.post('/v1/ssh_keys', { public_key: key.line });
    const res = await u.client.delete(`/v1/ssh_keys/${created.body.uuid}`);
    assert.equal(res.status, 204);
    assert.equal((await u.client.get('/v1/ssh_keys')).body.count, 0);
    expectNotFound(await u.client.delete(`/v1/ssh_keys/${created.body.uuid}`));
    assert.equal((await u.client.post('/v1/ssh_keys', { public_key: key.line })).status, 201);
  });

  it('G4 another user’s key is 404 and stays; a malformed id is 400', async () => {
    const u = await member();
    const other = await member();
    const theirs = await other.client.post('/v1/ssh_keys', { public_key: testSshKey().line });
    expectNotFound(await u.client.delete(`/v1/ssh_keys/${theirs.body.uuid}`));
    assert.equal((await other.client.get('/v1/ssh_keys')).body.count, 1);
    assert.equal((await u.client.delete('/v1/ssh_keys/not-a-uuid')).status, 400);
  });
});
