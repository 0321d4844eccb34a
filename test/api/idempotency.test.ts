import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, describe, it } from 'node:test';
import { sql } from 'drizzle-orm';
import { queryRows } from '../../src/db/client.js';
import { requestFingerprint } from '../../src/http/idempotency.js';
import { resealSecrets } from '../../src/reseal.js';
import { assertErrorBody } from '../support/assertions.js';
import { factories } from '../support/factories.js';
import {
  buildTestApp,
  type Client,
  clientFor,
  type Json,
  type Res,
  SECRET_KEY,
  startApp,
} from '../support/harness.js';
import { operationOf, readyWorld } from '../support/jobs.js';

// Issue 22: Idempotency-Key on every POST, PATCH and DELETE (http/idempotency.ts).
const t = await buildTestApp();
// A second API process on the same database (no shared memory with the first): a claim held by one
// is seen by the other only through the database.
const other = await startApp(t.database);
after(() => other.close());
const f = factories(t);

const newKey = () => `key-${randomBytes(8).toString('hex')}`;
const withKey = (
  client: Client,
  method: 'POST' | 'PATCH' | 'DELETE',
  url: string,
  key: string,
  body?: unknown,
) => client.request(method, url, body, { 'idempotency-key': key });

async function siteCount(client: Client, accountId: string): Promise<number> {
  const res = await client.get(`/v1/sites?account_id=${accountId}`);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body.count;
}

async function owner() {
  const account = await f.account();
  const user = await f.user([{ account_id: account.id, roles: 'owner' }]);
  return { account, user };
}

/** Every row of every table of the control plane's schema, as text (what a reader of the files would find). */
async function everyRowAsText(): Promise<string> {
  const db = t.database.db;
  const tables = await queryRows<{ name: string }>(
    db,
    sql`select table_name as name from information_schema.tables
        where table_schema = 'public' and table_type = 'BASE TABLE'`,
  );
  const texts: string[] = [];
  for (const { name } of tables) {
    const rows = await queryRows<{ row: string }>(db, sql.raw(`select t::text as row from "${name}" t`));
    texts.push(...rows.map((r) => r.row));
  }
  return texts.join('\n');
}

function scrape(text: string, outcome: string): number {
  const line = text
    .split('\n')
    .find((l) => l.startsWith(`hostplane_idempotency_requests_total{outcome="${outcome}"}`));
  return Number(line?.split(' ').at(-1) ?? Number.NaN);
}

describe('Idempotency-Key', () => {
  it('issue 22 idempotency: the same key with the same request replays the status, body and headers (Idempotent-Replayed: true); one row is created', async () => {
    const { account, user } = await owner();
    const key = newKey();
    const body = { name: 'Replayed site', account_id: account.id };
    const first = await withKey(user.client, 'POST', '/v1/sites', key, body);
    assert.equal(first.status, 201, JSON.stringify(first.body));
    assert.equal(first.headers['idempotent-replayed'], undefined);
    // The same body with its keys in another order is the same request (canonical form).
    const again = await withKey(user.client, 'POST', '/v1/sites', key, {
      account_id: account.id,
      name: 'Replayed site',
    });
    assert.equal(again.status, 201);
    assert.equal(again.headers['idempotent-replayed'], 'true');
    assert.deepEqual(again.body, first.body);
    assert.equal(again.raw.body, first.raw.body);
    assert.equal(again.headers['content-type'], first.headers['content-type']);
    // The request id is this request's, not the replayed one's.
    assert.notEqual(again.headers['x-request-id'], first.headers['x-request-id']);
    assert.equal(await siteCount(user.client, account.id), 1);
    // Without a key, the same body creates another site (the header is optional and opt-in).
    const plain = await user.client.post('/v1/sites', body);
    assert.equal(plain.status, 201);
    assert.equal(await siteCount(user.client, account.id), 2);
  });

  it('issue 22 idempotency: a 4xx of the route is stored and replayed too (the request ran)', async () => {
    const { user } = await owner();
    const key = newKey();
    const foreign = { name: 'Nowhere', account_id: (await f.account()).id };
    const first = await withKey(user.client, 'POST', '/v1/sites', key, foreign);
    assertErrorBody(first, 400);
    const again = await withKey(user.client, 'POST', '/v1/sites', key, foreign);
    assertErrorBody(again, 400);
    assert.equal(again.headers['idempotent-replayed'], 'true');
    assert.deepEqual(again.body, first.body);
  });

  it('issue 22 idempotency: the same key with another body, path or method is a 422 idempotency_key_reused, and runs nothing', async () => {
    const { account, user } = await owner();
    const key = newKey();
    const first = await withKey(user.client, 'POST', '/v1/sites', key, {
      name: 'One',
      account_id: account.id,
    });
    assert.equal(first.status, 201);
    const before = await t.anonymous.get('/metrics');
    const mismatch = await withKey(user.client, 'POST', '/v1/sites', key, {
      name: 'Two',
      account_id: account.id,
    });
    assertErrorBody(mismatch, 422);
    assert.equal(mismatch.body.errors[0].code, 'idempotency_key_reused');
    assert.equal(mismatch.body.errors[0].field, 'Idempotency-Key');
    assert.equal(mismatch.headers['idempotent-replayed'], undefined);
    const otherRoute = await withKey(user.client, 'PATCH', `/v1/sites/${first.body.id}`, key, {
      name: 'One',
    });
    assertErrorBody(otherRoute, 422);
    assert.equal(otherRoute.body.errors[0].code, 'idempotency_key_reused');
    assert.equal(await siteCount(user.client, account.id), 1);
    const sites = await user.client.get(`/v1/sites/${first.body.id}`);
    assert.equal(sites.body.name, 'One');
    const after = await t.anonymous.get('/metrics');
    assert.equal(scrape(after.raw.body, 'mismatch') - scrape(before.raw.body, 'mismatch'), 2);
  });

  it('issue 22 idempotency: 20 concurrent requests with one key (two API processes) create exactly one site; every answer is the original (or its replay) or a 409 with Retry-After', async () => {
    const { account, user } = await owner();
    const key = newKey();
    const body = { name: 'Raced', account_id: account.id };
    const clients = [user.client, clientFor(other.app, user.authorization)];
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) => withKey(clients[i % 2] as Client, 'POST', '/v1/sites', key, body)),
    );
    const created = answers.filter((r) => r.status === 201);
    const originals = created.filter((r) => r.headers['idempotent-replayed'] !== 'true');
    assert.equal(originals.length, 1, answers.map((r) => r.status).join(','));
    for (const res of answers) {
      if (res.status === 201) assert.deepEqual(res.body, originals[0]?.body);
      else {
        assertErrorBody(res, 409);
        assert.ok(Number(res.headers['retry-after']) >= 1);
      }
    }
    assert.equal(await siteCount(user.client, account.id), 1);
    // Once the first has ended, the key replays in both processes.
    for (const client of clients) {
      const later = await withKey(client, 'POST', '/v1/sites', key, body);
      assert.equal(later.status, 201);
      assert.equal(later.headers['idempotent-replayed'], 'true');
      assert.deepEqual(later.body, originals[0]?.body);
    }
  });

  it('issue 22 idempotency: a claim held by another process is a 409 with Retry-After; after the 60 s lock timeout (a crashed process) it is taken over and runs once', async () => {
    const { account, user } = await owner();
    const key = newKey();
    const body = { name: 'Taken over', account_id: account.id };
    // What a process that claimed the key and then died leaves behind (its clock is this one's).
    other.clock.set(t.clock.now());
    const fingerprint = requestFingerprint({
      method: 'POST',
      route: '/v1/sites',
      params: {},
      query: {},
      body,
    });
    const held = await other.app.services.idempotency.claim(`user:${user.userId}`, key, fingerprint);
    assert.equal(held.kind, 'claimed');
    const busy = await withKey(user.client, 'POST', '/v1/sites', key, body);
    assertErrorBody(busy, 409);
    assert.ok(Number(busy.headers['retry-after']) >= 1);
    assert.equal(await siteCount(user.client, account.id), 0);
    t.clock.advance(61_000);
    const runs = await withKey(user.client, 'POST', '/v1/sites', key, body);
    assert.equal(runs.status, 201);
    assert.equal(runs.headers['idempotent-replayed'], undefined);
    const replay = await withKey(user.client, 'POST', '/v1/sites', key, body);
    assert.equal(replay.headers['idempotent-replayed'], 'true');
    assert.equal(await siteCount(user.client, account.id), 1);
  });

  it('issue 22 idempotency: after IDEMPOTENCY_TTL_HOURS (24 h) the key has expired: the same request runs again', async () => {
    const { account, user } = await owner();
    const key = newKey();
    const body = { name: 'Expiring', account_id: account.id };
    const first = await withKey(user.client, 'POST', '/v1/sites', key, body);
    assert.equal(first.status, 201);
    t.clock.advance(23 * 3_600_000);
    const within = await withKey(user.client, 'POST', '/v1/sites', key, body);
    assert.equal(within.headers['idempotent-replayed'], 'true');
    t.clock.advance(1 * 3_600_000 + 1000);
    const expired = await withKey(user.client, 'POST', '/v1/sites', key, body);
    assert.equal(expired.status, 201);
    assert.equal(expired.headers['idempotent-replayed'], undefined);
    assert.notEqual(expired.body.id, first.body.id);
    assert.equal(await siteCount(user.client, account.id), 2);
  });

  it('issue 22 idempotency: expired keys are swept (a bounded batch on a later claim)', async () => {
    const { account, user } = await owner();
    for (let i = 0; i < 3; i++)
      assert.equal(
        (await withKey(user.client, 'POST', '/v1/sites', newKey(), { name: `S${i}`, account_id: account.id }))
          .status,
        201,
      );
    t.clock.advance(25 * 3_600_000);
    // The sweep runs on the next fresh claim (at most once a minute per process).
    await withKey(user.client, 'POST', '/v1/sites', newKey(), { name: 'later', account_id: account.id });
    assert.equal(await t.app.services.idempotency.sweep(), 0, 'everything expired was already swept');
  });

  it('issue 22 idempotency: a replayed asynchronous call (createBackup, 202) returns the same backup and the same operation (Location)', async () => {
    const w = await readyWorld(t, f);
    const key = newKey();
    const body = { description: 'nightly', notification_emails: ['ops@example.test'] };
    const url = `/v1/installs/${w.install.id}/backups`;
    const first = await withKey(w.owner.client, 'POST', url, key, body);
    assert.equal(first.status, 202, JSON.stringify(first.body));
    const again = await withKey(w.owner.client, 'POST', url, key, body);
    assert.equal(again.status, 202);
    assert.equal(again.headers['idempotent-replayed'], 'true');
    assert.equal(again.headers.location, first.headers.location);
    assert.deepEqual(again.body, first.body);
    const op = await operationOf(w.owner.client, again);
    assert.equal(op.id, (await operationOf(w.owner.client, first)).id);
    const list = await w.owner.client.get(url);
    assert.equal(list.body.count, 1);
  });

  it('issue 22 idempotency: a 5xx is not stored: the key is released and a retry runs', async () => {
    const { account, user } = await owner();
    const key = newKey();
    const body = { name: 'After a failure', account_id: account.id };
    // An injected failure of the route's one service call (a database error would be the real case).
    const sites = t.app.services.sites;
    const create = sites.create;
    sites.create = async () => {
      throw new Error('injected failure');
    };
    let failed: Res;
    try {
      failed = await withKey(user.client, 'POST', '/v1/sites', key, body);
    } finally {
      sites.create = create;
    }
    assert.equal(failed.status, 500);
    const retry = await withKey(user.client, 'POST', '/v1/sites', key, body);
    assert.equal(retry.status, 201, JSON.stringify(retry.body));
    assert.equal(retry.headers['idempotent-replayed'], undefined);
    assert.equal(await siteCount(user.client, account.id), 1);
  });

  it('issue 22 idempotency: a key that is empty, longer than 255, or not printable ASCII without spaces is a 400 with a field error', async () => {
    const { account, user } = await owner();
    const body = { name: 'Bad key', account_id: account.id };
    for (const key of ['', 'x'.repeat(256), 'has space', 'tab\tkey']) {
      const res = await withKey(user.client, 'POST', '/v1/sites', key, body);
      assertErrorBody(res, 400);
      assert.equal(res.body.errors[0].field, 'Idempotency-Key', key);
      assert.equal(res.body.errors[0].code, 'idempotency_key_invalid');
    }
    assert.equal(await siteCount(user.client, account.id), 0);
    const longest = await withKey(user.client, 'POST', '/v1/sites', `~${'!'.repeat(254)}`, body);
    assert.equal(longest.status, 201);
  });

  it("issue 22 idempotency: two users with the same key never see each other's responses", async () => {
    const a = await owner();
    const b = await owner();
    const key = newKey();
    const ra = await withKey(a.user.client, 'POST', '/v1/sites', key, {
      name: 'A',
      account_id: a.account.id,
    });
    const rb = await withKey(b.user.client, 'POST', '/v1/sites', key, {
      name: 'B',
      account_id: b.account.id,
    });
    assert.equal(ra.status, 201);
    assert.equal(rb.status, 201);
    assert.equal(rb.headers['idempotent-replayed'], undefined);
    assert.notEqual(ra.body.id, rb.body.id);
    // A's very request under A's key, sent by B: B's keys are B's own, so it runs as B (a 400: not B's
    // account) and never answers A's stored 201.
    const k3 = newKey();
    const bodyA = { name: 'A2', account_id: a.account.id };
    assert.equal((await withKey(a.user.client, 'POST', '/v1/sites', k3, bodyA)).status, 201);
    const cross = await withKey(b.user.client, 'POST', '/v1/sites', k3, bodyA);
    assertErrorBody(cross, 400);
    assert.equal(cross.headers['idempotent-replayed'], undefined);
    const same = await withKey(b.user.client, 'POST', '/v1/sites', key, {
      name: 'B',
      account_id: b.account.id,
    });
    assert.equal(same.headers['idempotent-replayed'], 'true');
    assert.equal(same.body.id, rb.body.id);
  });

  it('issue 22 idempotency: PATCH and DELETE take the key too (a replayed delete answers its 204 again)', async () => {
    const { account, user } = await owner();
    const site = await f.site(user.client, account.id);
    const key = newKey();
    const gone = await withKey(user.client, 'DELETE', `/v1/sites/${site.id}`, key);
    assert.equal(gone.status, 204, JSON.stringify(gone.body));
    const again = await withKey(user.client, 'DELETE', `/v1/sites/${site.id}`, key);
    assert.equal(again.status, 204);
    assert.equal(again.headers['idempotent-replayed'], 'true');
    const fresh = await withKey(user.client, 'DELETE', `/v1/sites/${site.id}`, newKey());
    assert.equal(fresh.status, 404);
  });

  it('issue 22 idempotency: the OpenAPI document has the Idempotency-Key header on every POST, PATCH and DELETE behind a credential, and Idempotent-Replayed on their answers', async () => {
    const doc: Json = (await t.anonymous.get('/v1/swagger')).body;
    let mutating = 0;
    for (const [path, item] of Object.entries(doc.paths as Record<string, Json>)) {
      for (const [method, op] of Object.entries(item as Record<string, Json>)) {
        if (!['post', 'patch', 'delete'].includes(method)) continue;
        const header = (op.parameters ?? []).find(
          (p: Json) => p.in === 'header' && p.name === 'Idempotency-Key',
        );
        const isPublic = Array.isArray(op.security) && op.security.length === 0;
        // Issue 30: the agent protocol's calls are idempotent by their own call keys, not Idempotency-Key.
        if (isPublic || path.startsWith('/v1/invitations/') || path.startsWith('/agent/v1/')) continue;
        mutating++;
        assert.ok(header, `${method} ${path}`);
        assert.equal(header.required ?? false, false);
        const success = Object.entries(op.responses).find(([s]) => s.startsWith('2'));
        assert.ok(success, `${method} ${path}`);
        assert.ok((success[1] as Json).headers?.['Idempotent-Replayed'], `${method} ${path}`);
        assert.ok(op.responses['422'], `${method} ${path}`);
      }
    }
    assert.ok(mutating > 20);
  });
  it('issue 28 finding 5: the once-only secrets of keyed answers (credential password, webhook secret, admin-made credential) are in no table in clear; the replay still answers them, also after hostplane reseal', async () => {
    const { account, user } = await owner();
    const keys = { credential: newKey(), webhook: newKey(), adminCredential: newKey() };
    const credentialUrl = `/v1/accounts/${account.id}/credentials`;
    const webhookUrl = `/v1/accounts/${account.id}/webhook_endpoints`;
    const adminUrl = `/admin/v1/users/${user.userId}/credentials`;
    const credentialBody = { scope: 'read', description: 'finding 5' };
    const webhookBody = { url: 'https://93.184.215.14/hook', event_types: ['site_report.sent'] };
    const credential = await withKey(user.client, 'POST', credentialUrl, keys.credential, credentialBody);
    assert.equal(credential.status, 201, JSON.stringify(credential.body));
    const webhook = await withKey(user.client, 'POST', webhookUrl, keys.webhook, webhookBody);
    assert.equal(webhook.status, 201, JSON.stringify(webhook.body));
    const made = await withKey(t.admin, 'POST', adminUrl, keys.adminCredential);
    assert.equal(made.status, 201, JSON.stringify(made.body));
    const secrets = [credential.body.password, webhook.body.secret, made.body.password] as string[];
    for (const secret of secrets) assert.ok(typeof secret === 'string' && secret.length >= 20);

    // The stored answers exist (raw rows), and no table holds any of the secrets as text.
    const stored = await queryRows<{ key: string; body: string | null }>(
      t.database.db,
      sql`select key, response_body as body from idempotency_keys
          where key in (${keys.credential}, ${keys.webhook}, ${keys.adminCredential})`,
    );
    assert.equal(stored.length, 3);
    for (const row of stored) assert.ok(row.body && !row.body.includes('{'), `${row.key} is sealed`);
    const everything = await everyRowAsText();
    for (const secret of secrets) assert.ok(!everything.includes(secret), 'a secret is stored in clear');

    // The replay answers the first response, secret included, to the same caller.
    const replays = async (app: { user: Client; admin: Client }) => {
      const again = {
        credential: await withKey(app.user, 'POST', credentialUrl, keys.credential, credentialBody),
        webhook: await withKey(app.user, 'POST', webhookUrl, keys.webhook, webhookBody),
        made: await withKey(app.admin, 'POST', adminUrl, keys.adminCredential),
      };
      for (const res of Object.values(again)) assert.equal(res.headers['idempotent-replayed'], 'true');
      assert.equal(again.credential.raw.body, credential.raw.body);
      assert.equal(again.webhook.raw.body, webhook.raw.body);
      assert.equal(again.made.raw.body, made.raw.body);
    };
    await replays({ user: user.client, admin: t.admin });

    // hostplane reseal moves the stored answers to the new key: an app with only the new key replays them.
    const NEW = 'idempotency-rotated-key-0123456789abcdefgh';
    const rotated = await startApp(t.database, { env: { HOSTPLANE_SECRET_KEY: NEW } });
    try {
      const counts = await resealSecrets(t.database, SECRET_KEY, NEW);
      assert.ok(counts.resealed >= 3, JSON.stringify(counts));
      await replays({ user: clientFor(rotated.app, user.authorization), admin: rotated.admin });
      assert.ok(!(await everyRowAsText()).includes(secrets[0] as string));
    } finally {
      await resealSecrets(t.database, NEW, SECRET_KEY);
      await rotated.close();
    }
    await replays({ user: user.client, admin: t.admin });
  });
});
