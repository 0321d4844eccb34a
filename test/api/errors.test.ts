import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { sql } from 'drizzle-orm';
import { assertErrorBody, expectFieldError } from '../support/assertions.js';
import { factories } from '../support/factories.js';
import { buildTestApp, clientFor, type Method } from '../support/harness.js';
import { captureLogs, settle } from '../support/logs.js';

// BODY_LIMIT_BYTES has a floor of 1024; 2048 keeps the oversized bodies of these tests small.
const t = await buildTestApp({ env: { BODY_LIMIT_BYTES: '2048' } });
const f = factories(t);
const w = await f.world();
const owner = w.owner.client;

// A second app on its own database, which the last tests break on purpose. Built before any test
// is declared: node:test starts running declared tests while top-level code is still awaiting.
const logs = captureLogs();
const broken = await buildTestApp({ logStream: logs.stream });
const bf = factories(broken);
const bw = await bf.world();
// Created through the admin API only, so no request of this app has verified (and cached) it yet.
const uncached = await bf.user([{ account_id: bw.account.id, roles: 'owner' }]);

const raw = (method: Method, url: string, payload: string, contentType?: string) =>
  owner.request(method, url, payload, contentType ? { 'content-type': contentType } : {});

describe('request bodies (G1)', () => {
  it('G1/G7 a malformed JSON body is a 400 with message and an errors[] array', async () => {
    for (const payload of ['{"name": "x",', '{name: x}', '[1, 2', '{"name": "x"} trailing']) {
      const res = await raw('POST', '/v1/sites', payload, 'application/json');
      assertErrorBody(res, 400);
      assert.match(res.body.message, /Malformed JSON/);
      assert.deepEqual(res.body.errors, []);
    }
  });

  it('G1/G7 an empty body declared as JSON is a 400 with errors[]', async () => {
    const res = await raw('POST', '/v1/sites', '', 'application/json');
    assertErrorBody(res, 400);
  });

  it('G1/G7 valid JSON of the wrong shape is a 400 with one field error', async () => {
    for (const payload of ['[1, 2]', '"a string"', 'null', '42']) {
      const res = await raw('POST', '/v1/sites', payload, 'application/json');
      assertErrorBody(res, 400);
      assert.equal(res.body.errors.length, 1, payload);
      assert.equal(res.body.errors[0].type, 'invalid_value');
    }
  });

  it('G1 application/json with a charset parameter is accepted', async () => {
    const payload = JSON.stringify({ name: 'Charset', account_id: w.account.id });
    const res = await raw('POST', '/v1/sites', payload, 'application/json; charset=utf-8');
    assert.equal(res.status, 201, JSON.stringify(res.body));
  });

  it('G1/G8 a body that is not JSON (text/plain, XML, form, none declared) is a 415 with a message', async () => {
    const cases: [string, string | undefined][] = [
      ['hello', 'text/plain'],
      ['<site><name>x</name></site>', 'application/xml'],
      ['<site/>', 'text/xml'],
      ['name=x', 'application/x-www-form-urlencoded'],
      ['name: x', 'application/yaml'],
      ['{"name":"x"}', undefined],
    ];
    for (const [payload, type] of cases) {
      const res = await raw('POST', '/v1/sites', payload, type);
      assertErrorBody(res, 415);
      assert.match(res.body.message, /application\/json/, String(type));
    }
    const patch = await raw('PATCH', `/v1/sites/${w.site.id}`, 'name=x', 'text/plain');
    assertErrorBody(patch, 415);
  });

  it('G1 an admin body that is not JSON is a 415 too', async () => {
    const res = await t.admin.request('POST', '/admin/v1/accounts', '<a/>', {
      'content-type': 'application/xml',
    });
    assertErrorBody(res, 415);
  });

  it('G8 a body over BODY_LIMIT_BYTES is a 413 with a message; one just under it is accepted', async () => {
    const big = JSON.stringify({ name: 'Big', account_id: w.account.id, padding: 'x'.repeat(3000) });
    const res = await raw('POST', '/v1/sites', big, 'application/json');
    assertErrorBody(res, 413);
    assert.match(res.body.message, /2048 bytes/);

    const lying = await owner.request('POST', '/v1/sites', '{}', {
      'content-type': 'application/json',
      'content-length': '999999',
    });
    assertErrorBody(lying, 413);

    const fits = JSON.stringify({ name: 'Fits', account_id: w.account.id, padding: 'x'.repeat(1900) });
    assert.ok(Buffer.byteLength(fits) < 2048);
    const ok = await raw('POST', '/v1/sites', fits, 'application/json');
    assert.equal(ok.status, 201, JSON.stringify(ok.body));
  });

  it('G2 body errors come after authentication: an anonymous bad body is a 401, not a 400/413/415', async () => {
    const cases: [string, string][] = [
      ['{"name":', 'application/json'],
      ['hello', 'text/plain'],
      [JSON.stringify({ padding: 'x'.repeat(3000) }), 'application/json'],
    ];
    for (const [payload, type] of cases) {
      const res = await t.anonymous.request('POST', '/v1/sites', payload, { 'content-type': type });
      assertErrorBody(res, 401);
    }
  });
});

describe('routes and methods (G8)', () => {
  it('G8 an unknown route is a 404 {"message":"Not Found"}, with or without credentials', async () => {
    for (const url of ['/nope', '/v1/nope', '/v1/sites/x/y/z', '/admin/v1/nope', '/v2/sites', '/v1']) {
      for (const client of [t.anonymous, owner, t.admin]) {
        const res = await client.get(url);
        assertErrorBody(res, 404);
        assert.deepEqual(res.body, { message: 'Not Found' }, url);
      }
    }
  });

  it('G8 a known path with a method it does not have is a 404 {"message":"Not Found"} (decision: no 405)', async () => {
    const cases: [Method, string][] = [
      ['PUT', '/v1/sites'],
      ['DELETE', '/v1/sites'],
      ['PATCH', '/v1/status'],
      ['POST', '/v1/status'],
      ['DELETE', '/healthz'],
      ['PUT', `/v1/sites/${w.site.id}`],
    ];
    for (const [method, url] of cases) {
      for (const client of [t.anonymous, owner]) {
        const res = await client.request(method, url);
        assertErrorBody(res, 404);
        assert.deepEqual(res.body, { message: 'Not Found' }, `${method} ${url}`);
        assert.equal(res.headers.allow, undefined);
      }
    }
  });

  it('G7 a URL the router cannot decode is a 400 with errors[], not Fastify’s own body', async () => {
    for (const url of ['/v1/sites/%E0%A4%A', '/v1/%', `/v1/sites/${'a'.repeat(300)}`]) {
      const res = await owner.request('GET', url, undefined, { 'x-request-id': 'bad-url-1' });
      assertErrorBody(res, 400);
      assert.match(res.body.message, /^Malformed URL/);
      assert.equal(res.headers['x-request-id'], 'bad-url-1');
    }
  });

  it('G7 a syntactically wrong path parameter is a 400 field error (not a 404 or 500)', async () => {
    const res = await owner.get('/v1/sites/not-a-uuid');
    expectFieldError(res, 'site_id');
  });

  it('G1 successful responses are JSON too', async () => {
    for (const url of ['/v1/status', '/v1/sites', `/v1/sites/${w.site.id}`]) {
      const res = await owner.get(url);
      assert.equal(res.status, 200, url);
      assert.match(String(res.headers['content-type']), /^application\/json/, url);
    }
  });
});

describe('unexpected server errors (G8)', () => {
  it('G8 a failing query is a bare 500 {"message":"Internal Server Error"}, logged once with the request id', async () => {
    await broken.database.db.execute(sql`drop table sites cascade`);
    logs.clear();
    const res = await bw.owner.client.request('GET', '/v1/sites', undefined, { 'x-request-id': 'boom-1' });
    assertErrorBody(res, 500);
    assert.deepEqual(res.body, { message: 'Internal Server Error' });
    assert.equal(res.headers['x-request-id'], 'boom-1');
    await settle();
    const errors = logs.lines().filter((line) => line.level >= 50);
    assert.equal(errors.length, 1, logs.text());
    const [line] = errors;
    assert.equal(line.reqId, 'boom-1');
    assert.equal(line.msg, 'unhandled error');
    assert.match(line.err.message, /sites/);
    assert.equal(typeof line.err.stack, 'string'); // the stack goes to the log, never to the client
    const completed = logs.forRequest('boom-1').filter((l) => l.msg === 'request completed');
    assert.equal(completed.length, 1);
    assert.equal(completed[0].res.statusCode, 500);
  });

  it('G8 a failure inside authentication is a 500 too (not a 401), without the password in the log', async () => {
    await broken.database.db.execute(sql`drop table credentials cascade`);
    logs.clear();
    const res = await clientFor(broken.app, uncached.authorization).request('GET', '/v1/sites', undefined, {
      'x-request-id': 'boom-2',
    });
    assertErrorBody(res, 500);
    assert.deepEqual(res.body, { message: 'Internal Server Error' });
    await settle();
    const errors = logs.lines().filter((line) => line.level >= 50);
    assert.equal(errors.length, 1, logs.text());
    assert.equal(errors[0].reqId, 'boom-2');
    const encoded = uncached.authorization.replace(/^Basic /, '');
    const password = Buffer.from(encoded, 'base64').toString('utf8').split(':')[1] ?? '';
    assert.ok(password.length >= 12);
    assert.ok(!logs.text().includes(password), 'password in a log line');
    assert.ok(!logs.text().includes(encoded), 'Authorization header in a log line');
    // The failing query looked the username up: its parameters are never logged, its SQL is.
    const username = Buffer.from(encoded, 'base64').toString('utf8').split(':')[0] ?? '';
    assert.ok(!logs.text().includes(username), 'a query parameter in a log line');
    assert.doesNotMatch(logs.text(), /"params"/);
    assert.match(errors[0].err.message ?? '', /credentials/);
  });
});
