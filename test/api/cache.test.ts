import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { expectFieldError } from '../support/assertions.js';
import { factories } from '../support/factories.js';
import { buildTestApp } from '../support/harness.js';
import { operationOf, readyWorld } from '../support/jobs.js';

const t = await buildTestApp();
const f = factories(t);

describe('purgeCache', () => {
  it('G10 accepts a purge with 202, its operation in Location, and the job completes it', async () => {
    const w = await readyWorld(t, f);
    const res = await w.owner.client.post(`/v1/installs/${w.install.id}/purge_cache`, { type: 'cdn' });
    assert.equal(res.status, 202);
    assert.equal(res.body.type, 'purge_cache');
    assert.deepEqual(res.body.resource, { type: 'install', id: w.install.id });
    await t.runJobs();
    assert.equal((await operationOf(w.owner.client, res)).status, 'completed');
  });

  it('G9 one purge per install and type every 60 seconds: a second is a 429 saying so, with Retry-After', async () => {
    const w = await readyWorld(t, f);
    const url = `/v1/installs/${w.install.id}/purge_cache`;
    assert.equal((await w.owner.client.post(url, { type: 'page' })).status, 202);
    t.clock.advance(20_000);
    const again = await w.owner.client.post(url, { type: 'page' });
    assert.equal(again.status, 429);
    assert.deepEqual(Object.keys(again.body), ['message']);
    assert.match(
      again.body.message,
      new RegExp(
        `page cache of install ${w.install.name} was purged at .+; one purge per cache type every 60 seconds, retry in 40 seconds`,
      ),
    );
    assert.equal(again.headers['retry-after'], '40');
    // Other types are limited separately, and the window passes.
    assert.equal((await w.owner.client.post(url, { type: 'object' })).status, 202);
    t.clock.advance(40_000);
    assert.equal((await w.owner.client.post(url, { type: 'page' })).status, 202);
    await t.runJobs();
  });

  it('G7 type is required and one of object, page, cdn', async () => {
    const w = await readyWorld(t, f);
    for (const body of [{}, { type: 'disk' }]) {
      const res = await w.owner.client.post(`/v1/installs/${w.install.id}/purge_cache`, body);
      assert.equal(expectFieldError(res, 'type').resource, 'cache');
    }
  });

  it('G12 an install still being provisioned is a 400 that says so', async () => {
    const w = await f.world();
    const res = await w.owner.client.post(`/v1/installs/${w.install.id}/purge_cache`, { type: 'page' });
    assert.equal(res.status, 400);
    assert.match(res.body.message, /still being provisioned/);
  });
});
