// test-db: postgres (the subject is ETag and If-None-Match on a read's body, not the control plane's database: docs/decisions.md #237)
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { factories } from '../support/factories.js';
import { buildTestApp } from '../support/harness.js';

const t = await buildTestApp();
const f = factories(t);

describe('ETag and If-None-Match on reads', () => {
  it('a GET answers a strong ETag; the same tag in If-None-Match gives 304 with no body', async () => {
    const w = await f.world();
    const url = `/v1/sites/${w.site.id}`;
    const first = await w.owner.client.get(url);
    assert.equal(first.status, 200);
    const tag = first.headers.etag;
    assert.match(String(tag), /^"[A-Za-z0-9_-]+"$/);
    const again = await w.owner.client.request('GET', url, undefined, { 'if-none-match': String(tag) });
    assert.equal(again.status, 304);
    assert.equal(again.raw.body, '');
    assert.equal(again.headers.etag, tag);
    const listed = await w.owner.client.request('GET', `/v1/sites?account_id=${w.account.id}`, undefined, {
      'if-none-match': `"other", W/${tag}, ${tag}`,
    });
    assert.equal(listed.status, 200, 'a list is another body: its tag differs');
    const star = await w.owner.client.request('GET', url, undefined, { 'if-none-match': '*' });
    assert.equal(star.status, 304);
  });

  it('a write changes the tag: the old one gets the new body (never a stale 304)', async () => {
    const w = await f.world();
    const url = `/v1/sites/${w.site.id}`;
    const before = await w.owner.client.get(url);
    const patched = await w.owner.client.patch(url, { name: 'Renamed site' });
    assert.equal(patched.status, 200);
    assert.equal(patched.headers.etag, undefined, 'only reads carry a tag');
    const after = await w.owner.client.request('GET', url, undefined, {
      'if-none-match': String(before.headers.etag),
    });
    assert.equal(after.status, 200);
    assert.equal(after.body.name, 'Renamed site');
    assert.notEqual(after.headers.etag, before.headers.etag);
  });

  it('G4 a matching tag never skips authorization: a foreign caller still gets 404', async () => {
    const w = await f.world();
    const stranger = await f.user([{ account_id: (await f.account()).id, roles: 'owner' }]);
    const url = `/v1/sites/${w.site.id}`;
    const mine = await w.owner.client.get(url);
    const theirs = await stranger.client.request('GET', url, undefined, {
      'if-none-match': String(mine.headers.etag),
    });
    assert.equal(theirs.status, 404);
    assert.equal(theirs.headers.etag, undefined);
  });
});
