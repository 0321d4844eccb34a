// test-db: postgres (the subject is request ids and what a log line may hold, not the control plane's database: docs/decisions.md #237)
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import { factories } from '../support/factories.js';
import { ADMIN_TOKEN, basic, buildTestApp, type Client, type Method } from '../support/harness.js';
import { captureLogs, settle } from '../support/logs.js';

// These tests cover design.md "Secrets: ... No secret in a log line" and the request id contract of
// src/app.ts; error bodies tie to their log line through the request id (G8).
const logs = captureLogs();
const t = await buildTestApp({ logStream: logs.stream });
const f = factories(t);
const w = await f.world();

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

const withId = (client: Client, method: Method, url: string, id: string, body?: unknown) =>
  client.request(method, url, body, { 'x-request-id': id });

describe('request ids', () => {
  it('G8 a well-formed x-request-id is echoed on successes and on every kind of error', async () => {
    const cases: [Client, Method, string, number][] = [
      [t.anonymous, 'GET', '/v1/status', 200],
      [w.owner.client, 'GET', '/v1/sites', 200],
      [t.anonymous, 'GET', '/v1/sites', 401],
      [t.anonymous, 'GET', '/nope', 404],
      [w.owner.client, 'GET', '/v1/sites?limit=abc', 400],
      [t.anonymous, 'GET', '/healthz', 200],
    ];
    for (const [client, method, url, status] of cases) {
      const id = `client-${randomUUID()}`;
      const res = await withId(client, method, url, id);
      assert.equal(res.status, status, url);
      assert.equal(res.headers['x-request-id'], id, url);
    }
    for (const id of ['abc', 'trace:1.2_3-4', 'x'.repeat(128)]) {
      assert.equal((await withId(t.anonymous, 'GET', '/v1/status', id)).headers['x-request-id'], id);
    }
  });

  it('G8 a request without x-request-id gets a fresh uuid', async () => {
    const ids = new Set<string>();
    for (let i = 0; i < 3; i++) {
      const res = await t.anonymous.get('/v1/status');
      assert.match(String(res.headers['x-request-id']), UUID);
      ids.add(String(res.headers['x-request-id']));
    }
    assert.equal(ids.size, 3);
  });

  it('G8 a malformed x-request-id (spaces, markup, over 128 characters, empty) is replaced by a uuid', async () => {
    for (const id of ['has spaces', '<script>', 'x'.repeat(129), 'ünïcode', 'a/b', '']) {
      const res = await withId(t.anonymous, 'GET', '/v1/status', id);
      assert.equal(res.status, 200);
      assert.match(String(res.headers['x-request-id']), UUID, JSON.stringify(id));
    }
  });
});

describe('log lines', () => {
  it('G8 every request writes exactly one completion line, carrying its request id and status', async () => {
    logs.clear();
    const cases: [Client, Method, string, number][] = [
      [t.anonymous, 'GET', '/v1/status', 200],
      [w.owner.client, 'GET', `/v1/sites/${w.site.id}`, 200],
      [t.anonymous, 'GET', '/v1/sites', 401],
      [t.anonymous, 'DELETE', '/v1/status', 404],
      [w.owner.client, 'POST', '/v1/sites', 400],
      [t.anonymous, 'GET', '/v1/%', 400],
    ];
    const ids: [string, number][] = [];
    for (const [client, method, url, status] of cases) {
      const id = `line-${randomUUID()}`;
      const res = await withId(client, method, url, id, method === 'POST' ? {} : undefined);
      assert.equal(res.status, status, url);
      ids.push([id, status]);
    }
    await settle();
    for (const [id, status] of ids) {
      const completed = logs.forRequest(id).filter((line) => line.msg === 'request completed');
      assert.equal(completed.length, 1, `${id}: ${logs.text()}`);
      assert.equal(completed[0].res.statusCode, status);
    }
    // Every line written while serving requests names its request.
    for (const line of logs.lines()) assert.equal(typeof line.reqId, 'string', JSON.stringify(line));
  });

  it('design "no secret in a log line": Basic credentials, the admin token and body passwords never appear', async () => {
    logs.clear();
    const secret = `pw-${randomUUID()}`;
    const encoded = w.owner.authorization.replace(/^Basic /, '');
    const ownerPassword = Buffer.from(encoded, 'base64').toString('utf8').split(':')[1] ?? '';
    const wrong = basic(w.owner.username, secret);

    // Basic auth: accepted, and refused.
    assert.equal((await w.owner.client.get('/v1/sites')).status, 200);
    assert.equal((await w.owner.client.get('/v1/nope')).status, 404);
    const refused = await t.anonymous.request('GET', '/v1/sites', undefined, { authorization: wrong });
    assert.equal(refused.status, 401);
    // The admin Bearer token, with a password inside JSON bodies (valid, invalid and malformed).
    const created = await t.admin.post('/admin/v1/accounts', { name: 'Logged', password: secret });
    assert.equal(created.status, 201);
    const invalid = await t.admin.post('/admin/v1/users', { email: 'nope', password: secret });
    assert.equal(invalid.status, 400);
    const malformed = await t.admin.request('POST', '/admin/v1/accounts', `{"password": "${secret}", x}`, {
      'content-type': 'application/json',
    });
    assert.equal(malformed.status, 400);
    // A response that carries a password (a new credential) does not put it in the log either.
    const issued = await t.admin.post(`/admin/v1/users/${w.owner.userId}/credentials`);
    assert.equal(issued.status, 201);
    const badAdmin = await t.anonymous.request(
      'POST',
      '/admin/v1/accounts',
      { name: 'X' },
      {
        authorization: `Bearer ${secret}`,
      },
    );
    assert.equal(badAdmin.status, 401);

    await settle();
    const text = logs.text();
    assert.ok(logs.lines().length >= 16, text); // the requests above were logged at all
    for (const [what, value] of [
      ['owner password', ownerPassword],
      ['owner Authorization header', encoded],
      ['refused Authorization header', wrong.replace(/^Basic /, '')],
      ['body password', secret],
      ['admin token', ADMIN_TOKEN],
      ['issued password', String(issued.body.password)],
    ]) {
      assert.ok(value && value.length >= 12, what);
      assert.ok(!text.includes(value as string), `${what} in a log line`);
    }
    for (const line of logs.lines()) {
      assert.equal(line.req?.headers, undefined, 'request headers in a log line');
      assert.equal(line.req?.body, undefined, 'request body in a log line');
    }
  });
});
