import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { factories } from '../support/factories.js';
import { basic, buildTestApp, type Client, clientFor, type Json, type Res } from '../support/harness.js';
import { readyWorld } from '../support/jobs.js';

// Issue 13: no input yields a 5xx, and nothing is stored other than as sent. Decisions in
// docs/conformance.wire.md ("Hostile input"); the one place is src/http/input.ts.

const t = await buildTestApp();
const f = factories(t);
const w = await readyWorld(t, f);
const doc: Json = (await t.anonymous.get('/v1/swagger')).body;

const NUL = 'a\u0000b';
const LONE = 'a\uD800b';

function fieldError(res: Res, field: string, code: string) {
  assert.equal(res.status, 400, JSON.stringify(res.body));
  const error = res.body.errors.find((e: Json) => e.field === field);
  assert.ok(error, `an error on ${field}: ${JSON.stringify(res.body)}`);
  assert.equal(error.type, 'invalid_value');
  assert.equal(error.code, code);
}

/** Sends a raw body (a JSON text, or bytes) with the JSON content type. */
function raw(client: Client, method: 'POST' | 'PATCH', url: string, payload: string | Buffer) {
  return client.request(method, url, payload, { 'content-type': 'application/json' });
}

async function siteCount() {
  return (await w.owner.client.get(`/v1/sites?account_id=${w.account.id}&limit=0`)).body.count;
}

describe('U+0000 and lone surrogates in strings (G7: 400 invalid_value naming the field)', () => {
  const cases: [string, () => Promise<Res>, string][] = [
    ['site name', () => w.owner.client.post('/v1/sites', { name: NUL, account_id: w.account.id }), 'name'],
    [
      'site tags',
      () => w.owner.client.post('/v1/sites', { name: 'ok', account_id: w.account.id, tags: ['x', NUL] }),
      'tags[1]',
    ],
    [
      'site group name',
      () => w.owner.client.patch(`/v1/sites/${w.site.id}`, { group_name: NUL }),
      'group_name',
    ],
    [
      'backup description',
      () =>
        w.owner.client.post(`/v1/installs/${w.install.id}/backups`, {
          description: NUL,
          notification_emails: ['a@example.test'],
        }),
      'description',
    ],
    [
      'admin account name',
      () => t.admin.post('/admin/v1/accounts', { name: NUL, preferred_data_center: 'us-central' }),
      'name',
    ],
    [
      'admin user first name',
      () =>
        t.admin.post('/admin/v1/users', {
          email: 'nul@example.test',
          first_name: NUL,
          last_name: 'x',
          memberships: [],
        }),
      'first_name',
    ],
  ];
  for (const [label, send, field] of cases) {
    it(`a NUL in the ${label} is a 400 invalid_string on ${field}, and nothing changes`, async () => {
      const before = await siteCount();
      fieldError(await send(), field, 'invalid_string');
      assert.equal(await siteCount(), before);
    });
  }

  it('a lone surrogate (JSON escape) is refused; a paired one round-trips unchanged', async () => {
    const lone = await raw(
      w.owner.client,
      'POST',
      '/v1/sites',
      `{"name": "a\\ud800b", "account_id": "${w.account.id}"}`,
    );
    fieldError(lone, 'name', 'invalid_string');
    assert.equal(LONE.length, 3);
    const pair = await raw(
      w.owner.client,
      'POST',
      '/v1/sites',
      `{"name": "smile \\ud83d\\ude00 \\u200f", "account_id": "${w.account.id}"}`,
    );
    assert.equal(pair.status, 201, JSON.stringify(pair.body));
    const got = await w.owner.client.get(`/v1/sites/${pair.body.id}`);
    assert.equal(got.body.name, 'smile \u{1F600} \u200F');
  });

  it('an unknown key holding a NUL is dropped like any unknown field (decisions.md 4); kept keys are checked', async () => {
    const res = await raw(w.owner.client, 'PATCH', `/v1/sites/${w.site.id}`, '{"name": "k", "a\\u0000": 1}');
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal('a\u0000' in res.body, false);
  });

  it('a NUL in a query string or a path parameter is a 400 (or the 404 of G12), never a 500', async () => {
    fieldError(await w.owner.client.get('/v1/sites?account_id=%00'), 'account_id', 'format');
    const res = await w.owner.client.get(`/v1/installs/${w.install.id}/domains/%00`);
    assert.equal(res.status, 404);
  });
});

describe('invalid UTF-8 bodies', () => {
  it('bytes that are not UTF-8 are a 400 invalid_utf8, not stored as U+FFFD', async () => {
    const before = await siteCount();
    const head = Buffer.from(`{"account_id": "${w.account.id}", "name": "bad `);
    for (const bytes of [[0xff], [0xc0, 0xaf], [0xed, 0xa0, 0x80], [0xe2, 0x82]]) {
      const body = Buffer.concat([head, Buffer.from(bytes), Buffer.from('"}')]);
      const res = await raw(w.owner.client, 'POST', '/v1/sites', body);
      fieldError(res, '(body)', 'invalid_utf8');
    }
    assert.equal(await siteCount(), before);
  });

  it('valid multi-byte UTF-8 is accepted unchanged', async () => {
    const name = 'Café ☕ שלום';
    const res = await raw(
      w.owner.client,
      'POST',
      '/v1/sites',
      Buffer.from(JSON.stringify({ name, account_id: w.account.id })),
    );
    assert.equal(res.status, 201, JSON.stringify(res.body));
    assert.equal(res.body.name, name);
  });
});

describe('the Basic credential (G2: 401 before any lookup)', () => {
  it('a NUL, a lone surrogate or invalid UTF-8 in the username or password is a 401', async () => {
    const headers = [
      basic(NUL, 'password-1234567'),
      basic('user', `pass${NUL}word`),
      `Basic ${Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(':password-123')]).toString('base64')}`,
      `Basic ${Buffer.from([0xed, 0xa0, 0x80, 0x3a, 0x61]).toString('base64')}`,
    ];
    for (const authorization of headers) {
      const res = await clientFor(t.app, authorization).get('/v1/accounts');
      assert.equal(res.status, 401, authorization);
      assert.deepEqual(res.body, { message: 'Bad Credentials' });
    }
  });
});

describe('non-finite numbers (G5)', () => {
  const paths: { path: string; admin: boolean; names: string[] }[] = Object.entries(
    doc.paths as Record<string, Json>,
  )
    .filter(([, item]) =>
      (item.get?.parameters ?? []).some((p: Json) => p.in === 'query' && p.name === 'limit'),
    )
    .map(([path, item]) => ({
      path,
      admin: path.startsWith('/admin/'),
      // The numeric paging parameters the list declares (a cursor-paged list has no offset).
      names: ['limit', 'offset'].filter((name) =>
        (item.get?.parameters ?? []).some((p: Json) => p.in === 'query' && p.name === name),
      ),
    }));
  const ids: Record<string, string> = {
    account_id: w.account.id,
    install_id: w.install.id,
    site_id: w.site.id,
    // Issue 30: a server's installs (a well-formed id: the paging parameters are checked first).
    server_id: '0f8fad5b-d9cb-469f-a165-70867728950e',
  };
  before(async () => {
    // Issue 22: the delivery log of a webhook endpoint is a paginated list too (a public documentation
    // address: accepted without WEBHOOK_ALLOW_PRIVATE_TARGETS, never delivered to here).
    const res = await w.owner.client.post(`/v1/accounts/${w.account.id}/webhook_endpoints`, {
      url: 'https://192.0.2.10/hook',
      event_types: ['backup.completed'],
    });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    ids.webhook_endpoint_id = (res.body as { id: string }).id;
  });
  const fill = (path: string) => path.replace(/\{(\w+)\}/g, (_m, name: string) => ids[name] ?? name);

  it('the paginated lists are found in the OpenAPI document', () => {
    assert.ok(paths.length >= 5, JSON.stringify(paths));
  });

  for (const value of ['1e309', '-1e309', 'Infinity', '1e400']) {
    it(`limit=${value} and offset=${value} are a 400 on every paginated list`, async () => {
      for (const { path, admin, names } of paths) {
        const client = admin ? t.admin : w.owner.client;
        for (const name of names) {
          const res = await client.get(`${fill(path)}?${name}=${value}`);
          assert.equal(
            res.status,
            400,
            `${path} ${name}=${value}: ${res.status} ${JSON.stringify(res.body)}`,
          );
          assert.ok(
            res.body.errors.some((e: Json) => e.field === name),
            `${path}: ${JSON.stringify(res.body)}`,
          );
        }
      }
    });
  }

  it('-0 and 2^63 answer without a 5xx (0, and a 400 over the maximum)', async () => {
    assert.equal((await w.owner.client.get('/v1/sites?limit=-0')).status, 200);
    assert.equal((await w.owner.client.get('/v1/sites?offset=9223372036854775808')).status, 400);
  });

  it('a non-finite number in a JSON body is a 400 naming the field', async () => {
    const res = await raw(t.admin, 'POST', '/admin/v1/clock', '{"advance_seconds": 1e309}');
    assert.equal(res.status, 400, JSON.stringify(res.body));
    assert.ok(res.body.errors.some((e: Json) => e.field === 'advance_seconds'));
  });
});
