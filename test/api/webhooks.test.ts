import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { eq } from 'drizzle-orm';
import { ROLES } from '../../src/auth/access.js';
import { mailOutbox, webhookAttempts, webhookDeliveries } from '../../src/db/schema.js';
import { expectFieldError } from '../support/assertions.js';
import { TEST_DB } from '../support/databases.js';
import { startDnsServer } from '../support/dns-server.js';
import { factories, type Member } from '../support/factories.js';
import { ADMIN_TOKEN, buildTestApp, clientFor, type Json, SECRET_KEY, startApp } from '../support/harness.js';
import { readyWorld } from '../support/jobs.js';
import { type Running, runCli } from '../support/process.js';
import { startReceiver, verifies } from '../support/webhooks.js';

// Issue 22: webhook endpoints and signed deliveries. The receivers are local HTTP servers, so the
// app allows loopback targets (WEBHOOK_ALLOWED_NETWORKS=127.0.0.0/8,::1); a second app on the same
// database runs with the default (refused) to prove the guard at save and at delivery.
const t = await buildTestApp({
  env: { WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8,::1', WEBHOOK_TIMEOUT_MS: '3000' },
});
const f = factories(t);
const HOUR = 3_600_000;

const endpointsOf = (accountId: string) => `/v1/accounts/${accountId}/webhook_endpoints`;

async function createEndpoint(owner: Member, accountId: string, body: Json) {
  const res = await owner.client.post(endpointsOf(accountId), body);
  assert.equal(res.status, 201, JSON.stringify(res.body));
  return res.body;
}

async function backup(w: Json) {
  const res = await w.owner.client.post(`/v1/installs/${w.install.id}/backups`, {
    description: 'webhooks',
    notification_emails: [],
  });
  assert.equal(res.status, 202, JSON.stringify(res.body));
  return res.body;
}

/** The ids of the account's events so far (made before an endpoint existed: never delivered to it). */
async function eventIds(w: Json): Promise<string[]> {
  const res = await w.owner.client.get(`/v1/accounts/${w.account.id}/events?limit=100`);
  return res.body.results.map((e: Json) => e.id);
}

/**
 * A world whose endpoint's receiver is gone (every attempt is a refused connection) and a ping to it,
 * not yet attempted. Only the ping is delivered (the world's provisioning events are not taken).
 */
async function pingToClosedReceiver() {
  const w = await f.world();
  const closed = await startReceiver();
  await closed.close();
  const endpoint = await createEndpoint(w.owner, w.account.id, {
    url: closed.url,
    event_types: ['site_report.sent'],
  });
  const one = `${endpointsOf(w.account.id)}/${endpoint.id}`;
  const ping = await w.owner.client.post(`${one}/ping`);
  assert.equal(ping.status, 202);
  return { w, one, ping: ping.body };
}

/** Sends the delivery again `times` times, running each attempt. */
async function redeliver(owner: Member, one: string, deliveryId: string, times: number) {
  for (let i = 0; i < times; i++) {
    const again = await owner.client.post(`${one}/deliveries/${deliveryId}/redeliver`);
    assert.equal(again.status, 202);
    await t.runJobs();
  }
}

/** Runs jobs, moving the clock a back-off step at a time, until `done` (bounded rounds). */
async function deliverUntil(done: () => boolean | Promise<boolean>, stepMs = 60_000, rounds = 40) {
  for (let i = 0; i < rounds; i++) {
    await t.runJobs();
    if (await done()) return;
    t.clock.advance(stepMs);
  }
  assert.fail('deliveries did not settle');
}

describe('webhook endpoints (issue 22)', () => {
  it('create shows the whsec_ secret once; get, list, patch and delete never show it', async () => {
    const w = await f.world();
    const created = await createEndpoint(w.owner, w.account.id, {
      url: 'http://127.0.0.1:9/hook',
      description: 'CI',
      event_types: ['backup.completed'],
    });
    assert.match(created.secret, /^whsec_[A-Za-z0-9+/=]{32}$/);
    assert.equal(created.enabled, true);
    assert.deepEqual(created.event_types, ['backup.completed']);
    const one = `${endpointsOf(w.account.id)}/${created.id}`;
    const got = await w.owner.client.get(one);
    assert.equal(got.status, 200);
    assert.equal(got.body.secret, undefined);
    assert.ok(!JSON.stringify(got.body).includes(created.secret));
    const list = await w.owner.client.get(endpointsOf(w.account.id));
    assert.equal(list.body.count, 1);
    assert.ok(!JSON.stringify(list.body).includes(created.secret));
    const patched = await w.owner.client.patch(one, { description: 'CD', enabled: false });
    assert.equal(patched.status, 200);
    assert.equal(patched.body.description, 'CD');
    assert.equal(patched.body.enabled, false);
    assert.equal((await w.owner.client.patch(one, {})).status, 400);
    assert.equal((await w.owner.client.delete(one)).status, 204);
    assert.equal((await w.owner.client.get(one)).status, 404);
  });

  it('bad input is a 400: not http(s), credentials in the URL, unknown event type, long description', async () => {
    const w = await f.world();
    for (const body of [
      { url: 'ftp://example.com/hook' },
      { url: 'https://user:pw@example.com/hook' },
      { url: 'not a url at all' },
      { url: 'https://192.0.2.10/hook', event_types: ['no.such_event'] },
      { url: 'https://192.0.2.10/hook', description: 'x'.repeat(501) },
    ]) {
      const res = await w.owner.client.post(endpointsOf(w.account.id), body);
      assert.equal(res.status, 400, JSON.stringify(body));
    }
  });

  it('G3/G4 only owners manage endpoints: every other role 403, strangers 404 (getWebhookEndpoint, updateWebhookEndpoint, deleteWebhookEndpoint, rotateWebhookEndpointSecret, pingWebhookEndpoint, listWebhookDeliveries, getWebhookDelivery, redeliverWebhookDelivery)', async () => {
    const w = await f.world();
    const endpoint = await createEndpoint(w.owner, w.account.id, { url: 'https://192.0.2.10/hook' });
    const ping = await w.owner.client.post(`${endpointsOf(w.account.id)}/${endpoint.id}/ping`);
    assert.equal(ping.status, 202);
    const others: [string, Member][] = [];
    for (const roles of ROLES.filter((r) => r !== 'owner'))
      others.push([
        roles,
        await f.user([
          {
            account_id: w.account.id,
            roles,
            ...(roles.startsWith('partial') && { install_ids: [w.install.id] }),
          },
        ]),
      ]);
    const stranger = await f.user([]);
    const one = `${endpointsOf(w.account.id)}/${endpoint.id}`;
    const routes: {
      operationId: string;
      method: 'GET' | 'PATCH' | 'DELETE' | 'POST';
      url: string;
      body?: Json;
    }[] = [
      { operationId: 'getWebhookEndpoint', method: 'GET', url: one },
      { operationId: 'updateWebhookEndpoint', method: 'PATCH', url: one, body: { description: 'x' } },
      { operationId: 'deleteWebhookEndpoint', method: 'DELETE', url: one },
      { operationId: 'rotateWebhookEndpointSecret', method: 'POST', url: `${one}/rotate_secret` },
      { operationId: 'pingWebhookEndpoint', method: 'POST', url: `${one}/ping` },
      { operationId: 'listWebhookDeliveries', method: 'GET', url: `${one}/deliveries` },
      { operationId: 'getWebhookDelivery', method: 'GET', url: `${one}/deliveries/${ping.body.id}` },
      {
        operationId: 'redeliverWebhookDelivery',
        method: 'POST',
        url: `${one}/deliveries/${ping.body.id}/redeliver`,
      },
    ];
    for (const r of routes) {
      for (const [roles, m] of others)
        assert.equal(
          (await m.client.request(r.method, r.url, r.body)).status,
          403,
          `${r.operationId} ${roles} 403`,
        );
      assert.equal(
        (await stranger.client.request(r.method, r.url, r.body)).status,
        404,
        `${r.operationId} 404`,
      );
      assert.equal((await t.anonymous.request(r.method, r.url, r.body)).status, 401, `${r.operationId} 401`);
    }
    // Another account's owner does not see this account's endpoint.
    const other = await f.world();
    assert.equal((await other.owner.client.get(one)).status, 404);
    // The owner may call each (delete last).
    for (const r of [...routes.filter((x) => x.method !== 'DELETE'), routes[2]]) {
      if (!r) continue;
      const res = await w.owner.client.request(r.method, r.url, r.body);
      assert.ok(res.status >= 200 && res.status < 300, `${r.operationId} ${res.status}`);
    }
  });
});

describe('SSRF guard (issue 22)', () => {
  it('a private, loopback, link-local or metadata URL is refused (400 url_refused) without WEBHOOK_ALLOWED_NETWORKS, and accepted with it', async () => {
    const strict = await startApp(t.database, {});
    after(() => strict.close());
    const w = await f.world();
    const client = clientFor(strict.app, w.owner.authorization);
    for (const url of [
      'http://127.0.0.1:8080/hook',
      'http://localhost/hook',
      'http://10.0.0.5/hook',
      'http://192.168.1.1/hook',
      'http://172.20.0.1/hook',
      'http://169.254.169.254/latest/meta-data',
      'http://[::1]/hook',
      'http://[fd00:ec2::254]/hook',
      'http://[fe80::1]/hook',
      'http://0.0.0.0/hook',
      'http://224.0.0.1/hook',
    ]) {
      const res = await client.post(endpointsOf(w.account.id), { url });
      assert.equal(res.status, 400, url);
      assert.equal(res.body.errors?.[0]?.code, 'url_refused', JSON.stringify(res.body));
      assert.equal(res.body.errors?.[0]?.field, 'url');
    }
    // With the setting (the test app), the same URL is accepted...
    const receiver = await startReceiver();
    after(() => receiver.close());
    const endpoint = await createEndpoint(w.owner, w.account.id, { url: receiver.url });
    // ...and a delivery made by the strict app is refused again after resolution (nothing is sent).
    const ping = await client.post(`${endpointsOf(w.account.id)}/${endpoint.id}/ping`);
    assert.equal(ping.status, 202);
    await strict.runJobs();
    const log = await client.get(`${endpointsOf(w.account.id)}/${endpoint.id}/deliveries`);
    const d = log.body.results.find((x: Json) => x.id === ping.body.id);
    assert.equal(d.status, 'pending');
    assert.equal(d.attempts, 1);
    assert.equal(d.last_status_code, null);
    assert.match(d.last_error, /^refused: 127\.0\.0\.1 resolves to 127\.0\.0\.1/);
    assert.equal(receiver.requests.length, 0);
    // The permissive app delivers it (a manual redelivery, now).
    const again = await w.owner.client.post(
      `${endpointsOf(w.account.id)}/${endpoint.id}/deliveries/${d.id}/redeliver`,
    );
    assert.equal(again.status, 202);
    await t.runJobs();
    assert.equal(receiver.accepted.size, 1);
    assert.ok(verifies(endpoint.secret, [...receiver.accepted.values()][0] as Json));
  });
});

describe('signed deliveries (issue 22)', () => {
  it('every delivery verifies with standardwebhooks; the receiver fails the first two attempts and still has each event exactly once by webhook-id', async () => {
    const w = await readyWorld(t, f);
    const receiver = await startReceiver({ failFirst: 2 });
    after(() => receiver.close());
    const endpoint = await createEndpoint(w.owner, w.account.id, { url: receiver.url });
    const earlier = await eventIds(w);
    await backup(w);
    await backup(w);
    await t.runJobs();
    const events = await w.owner.client.get(`/v1/accounts/${w.account.id}/events?limit=100`);
    const expected = events.body.results
      .map((e: Json) => e.id)
      .filter((id: string) => !earlier.includes(id))
      .sort();
    // 2 backups: started, completed, operation.completed each.
    assert.equal(expected.length, 6, JSON.stringify(events.body.results.map((e: Json) => e.type)));
    await deliverUntil(() => receiver.accepted.size === expected.length);
    assert.deepEqual([...receiver.accepted.keys()].sort(), expected);
    for (const r of receiver.requests) assert.ok(verifies(endpoint.secret, r), `signature of ${r.id}`);
    // Three attempts per event (two failures, one success), the same id each time.
    for (const id of expected) assert.equal(receiver.requests.filter((r) => r.id === id).length, 3);
    for (const r of receiver.accepted.values()) {
      const body = JSON.parse(r.body);
      assert.equal(body.id, r.id);
      assert.equal(body.account_id, w.account.id);
    }
    const log = await w.owner.client.get(`${endpointsOf(w.account.id)}/${endpoint.id}/deliveries`);
    assert.equal(log.body.count, 6);
    for (const d of log.body.results) {
      assert.equal(d.status, 'delivered');
      assert.equal(d.attempts, 3);
      assert.equal(d.last_status_code, 200);
      assert.equal(d.response_excerpt, 'ok');
      assert.equal(typeof d.last_latency_ms, 'number');
    }
  });

  it('delivery log (issue 22): a receiver failing twice then answering shows 3 attempts in order with status, error kind, latency and excerpt, never a secret; user.invited is delivered like every event', async () => {
    const w = await f.world();
    const receiver = await startReceiver({ failFirst: 2 });
    after(() => receiver.close());
    const endpoint = await createEndpoint(w.owner, w.account.id, {
      url: receiver.url,
      event_types: ['user.invited'],
    });
    const email = `hook-${endpoint.id.slice(0, 8)}@example.test`;
    const invited = await w.owner.client.post(`/v1/accounts/${w.account.id}/account_users`, {
      user: { account_id: w.account.id, first_name: 'Ada', last_name: 'L', email, roles: 'full' },
    });
    assert.equal(invited.status, 201, JSON.stringify(invited.body));
    await deliverUntil(() => receiver.accepted.size === 1);
    const body = JSON.parse([...receiver.accepted.values()][0]?.body ?? '{}');
    assert.equal(body.type, 'user.invited');
    assert.equal(body.data.email, email);
    const log = await w.owner.client.get(`${endpointsOf(w.account.id)}/${endpoint.id}/deliveries`);
    assert.equal(log.status, 200);
    assert.equal(log.body.count, 1);
    const [d] = log.body.results;
    assert.equal(d.status, 'delivered');
    assert.equal(d.attempts, 3);
    const attempts = d.attempt_log as Json[];
    assert.deepEqual(
      attempts.map((a) => [a.attempt, a.status_code, a.error_kind, a.error]),
      [
        [1, 500, 'http_status', 'HTTP 500'],
        [2, 500, 'http_status', 'HTTP 500'],
        [3, 200, null, null],
      ],
    );
    // The receiver's 4000-byte failure bodies are cut to 1 KB; the success's body is kept whole.
    assert.deepEqual(
      attempts.map((a) => a.response_excerpt),
      ['x'.repeat(1024), 'x'.repeat(1024), 'ok'],
    );
    for (const a of attempts) assert.ok(Number.isInteger(a.latency_ms) && a.latency_ms >= 0);
    const started = attempts.map((a) => Date.parse(a.started_at));
    assert.deepEqual(
      started,
      [...started].sort((a, b) => a - b),
    );
    assert.ok(started[0] !== undefined && started[0] < (started[2] ?? 0), 'retries start later');
    const text = JSON.stringify(log.body);
    assert.ok(!text.includes(endpoint.secret.slice(6)), 'no secret in the log');
    assert.ok(!text.includes('v1,'), 'no signature in the log');
  });

  it('delivery log (issue 22): a refused connection is error_kind connection without a status; a delivery shows its latest 20 attempts', async () => {
    const { w, one, ping } = await pingToClosedReceiver();
    assert.deepEqual(ping.attempt_log, []);
    await t.runJobs();
    const first = (await w.owner.client.get(`${one}/deliveries`)).body.results[0];
    assert.equal(first.status, 'pending');
    assert.equal(first.attempt_log.length, 1);
    const [attempt] = first.attempt_log;
    assert.equal(attempt.attempt, 1);
    assert.equal(attempt.status_code, null);
    assert.equal(attempt.error_kind, 'connection');
    assert.match(attempt.error, /ECONNREFUSED/);
    assert.equal(attempt.response_excerpt, null);
    await redeliver(w.owner, one, ping.id, 21);
    const last = (await w.owner.client.get(`${one}/deliveries`)).body.results[0];
    assert.equal(last.attempts, 22);
    assert.deepEqual(
      last.attempt_log.map((a: Json) => a.attempt),
      Array.from({ length: 20 }, (_, i) => i + 3),
    );
  });

  it('delivery log (issue 22, decision 115): a delivery redelivered past 50 attempts keeps only its latest 50 rows and shows the latest 20, oldest first', async () => {
    const { w, one, ping } = await pingToClosedReceiver();
    await t.runJobs();
    const total = 55;
    await redeliver(w.owner, one, ping.id, total - 1);
    const rows = await t.database.db
      .select({ attempt: webhookAttempts.attempt })
      .from(webhookAttempts)
      .where(eq(webhookAttempts.delivery_id, ping.id));
    assert.deepEqual(
      rows.map((r) => r.attempt).sort((a, b) => a - b),
      Array.from({ length: 50 }, (_, i) => total - 49 + i),
      'attempts 6-55 kept, 1-5 deleted',
    );
    const got = await w.owner.client.get(`${one}/deliveries/${ping.id}`);
    assert.equal(got.body.attempts, total);
    assert.deepEqual(
      got.body.attempt_log.map((a: Json) => a.attempt),
      Array.from({ length: 20 }, (_, i) => total - 19 + i),
    );
  });

  it("getWebhookDelivery (issue 22): one delivery with its attempt_log, as the log lists it; another endpoint's or account's delivery and an unknown id are 404, a malformed id 400", async () => {
    const w = await f.world();
    const receiver = await startReceiver({ failFirst: 1 });
    after(() => receiver.close());
    // Only the ping is delivered (the world's provisioning events are not taken).
    const endpoint = await createEndpoint(w.owner, w.account.id, {
      url: receiver.url,
      event_types: ['site_report.sent'],
    });
    const one = `${endpointsOf(w.account.id)}/${endpoint.id}`;
    const ping = await w.owner.client.post(`${one}/ping`);
    assert.equal(ping.status, 202);
    await deliverUntil(() => receiver.accepted.size === 1);
    const got = await w.owner.client.get(`${one}/deliveries/${ping.body.id}`);
    assert.equal(got.status, 200, JSON.stringify(got.body));
    assert.equal(got.body.id, ping.body.id);
    assert.equal(got.body.event_type, 'webhook.ping');
    assert.equal(got.body.status, 'delivered');
    assert.equal(got.body.attempts, 2);
    assert.deepEqual(
      got.body.attempt_log.map((a: Json) => [a.attempt, a.status_code, a.error_kind]),
      [
        [1, 500, 'http_status'],
        [2, 200, null],
      ],
    );
    const listed = await w.owner.client.get(`${one}/deliveries`);
    assert.deepEqual(got.body, listed.body.results[0]);
    assert.ok(!JSON.stringify(got.body).includes(endpoint.secret.slice(6)), 'no secret');

    // G4: through another endpoint of the account, or another account, it does not exist.
    const second = await createEndpoint(w.owner, w.account.id, { url: receiver.url });
    const viaSecond = await w.owner.client.get(
      `${endpointsOf(w.account.id)}/${second.id}/deliveries/${ping.body.id}`,
    );
    assert.equal(viaSecond.status, 404);
    assert.deepEqual(viaSecond.body, { message: 'Not Found' });
    const other = await f.world();
    const theirs = await createEndpoint(other.owner, other.account.id, { url: receiver.url });
    const viaOther = await other.owner.client.get(
      `${endpointsOf(other.account.id)}/${theirs.id}/deliveries/${ping.body.id}`,
    );
    assert.equal(viaOther.status, 404);
    assert.deepEqual(viaOther.body, viaSecond.body);
    assert.equal((await other.owner.client.get(`${one}/deliveries/${ping.body.id}`)).status, 404);
    const unknown = await w.owner.client.get(`${one}/deliveries/${randomUUID()}`);
    assert.equal(unknown.status, 404);
    assert.deepEqual(unknown.body, viaSecond.body);
    expectFieldError(await w.owner.client.get(`${one}/deliveries/nope`), 'delivery_id', 'invalid_value');
  });

  it('deliveries go out in event order per install: a later event waits while an earlier one is retried', async () => {
    const w = await readyWorld(t, f);
    const receiver = await startReceiver({ failFirst: 2 });
    after(() => receiver.close());
    await createEndpoint(w.owner, w.account.id, { url: receiver.url });
    const earlier = await eventIds(w);
    await backup(w);
    await backup(w);
    await t.runJobs();
    const events = await w.owner.client.get(`/v1/accounts/${w.account.id}/events?limit=100`);
    const order = events.body.results
      .map((e: Json) => e.id)
      .filter((id: string) => !earlier.includes(id))
      .reverse(); // oldest first
    await deliverUntil(() => receiver.accepted.size === order.length);
    // Attempts were made in event order: every attempt of event k precedes every attempt of k+1.
    const attempted = receiver.requests.map((r) => order.indexOf(r.id));
    assert.deepEqual(
      attempted,
      [...attempted].sort((a, b) => a - b),
    );
    assert.deepEqual([...receiver.accepted.keys()], order);
  });

  it('an event filter delivers only the listed types; a response excerpt is at most 1 KB', async () => {
    const w = await readyWorld(t, f);
    const receiver = await startReceiver({ failFirst: 1 });
    after(() => receiver.close());
    const endpoint = await createEndpoint(w.owner, w.account.id, {
      url: receiver.url,
      event_types: ['backup.completed'],
    });
    await backup(w);
    await deliverUntil(() => receiver.accepted.size === 1);
    assert.equal(JSON.parse([...receiver.accepted.values()][0]?.body ?? '{}').type, 'backup.completed');
    assert.equal(new Set(receiver.requests.map((r) => r.id)).size, 1);
    const log = await w.owner.client.get(`${endpointsOf(w.account.id)}/${endpoint.id}/deliveries`);
    assert.equal(log.body.count, 1);
    // The failed attempt's 4000-byte body was cut to 1 KB (then replaced by the success's "ok").
    assert.equal(log.body.results[0].attempts, 2);
  });

  it('rotate_secret: during the 24 h overlap each delivery verifies with the old and the new secret; after it only the new', async () => {
    const w = await readyWorld(t, f);
    const receiver = await startReceiver();
    after(() => receiver.close());
    const endpoint = await createEndpoint(w.owner, w.account.id, { url: receiver.url });
    const one = `${endpointsOf(w.account.id)}/${endpoint.id}`;
    const rotated = await w.owner.client.post(`${one}/rotate_secret`);
    assert.equal(rotated.status, 200);
    assert.match(rotated.body.secret, /^whsec_/);
    assert.notEqual(rotated.body.secret, endpoint.secret);
    assert.ok(rotated.body.secret_rotation_ends_at);
    assert.equal((await w.owner.client.get(one)).body.secret, undefined);
    await w.owner.client.post(`${one}/ping`);
    await t.runJobs();
    const during = receiver.requests.at(-1);
    assert.ok(during);
    assert.equal(during.signatures.length, 2);
    assert.ok(verifies(endpoint.secret, during), 'old secret verifies during the overlap');
    assert.ok(verifies(rotated.body.secret, during), 'new secret verifies during the overlap');
    t.clock.advance(24 * HOUR + 1000);
    await w.owner.client.post(`${one}/ping`);
    await t.runJobs();
    const later = receiver.requests.at(-1);
    assert.ok(later && later !== during);
    assert.equal(later.signatures.length, 1);
    assert.ok(!verifies(endpoint.secret, later), 'old secret no longer verifies');
    assert.ok(verifies(rotated.body.secret, later));
    assert.equal((await w.owner.client.get(one)).body.secret_rotation_ends_at, null);
  });

  it('an endpoint failing for 3 days is disabled and its owners are mailed; enabling it again clears the failure', async () => {
    const w = await readyWorld(t, f);
    const receiver = await startReceiver({ alwaysStatus: 503 });
    after(() => receiver.close());
    const endpoint = await createEndpoint(w.owner, w.account.id, { url: receiver.url });
    const one = `${endpointsOf(w.account.id)}/${endpoint.id}`;
    await w.owner.client.post(`${one}/ping`);
    await backup(w);
    await deliverUntil(async () => (await w.owner.client.get(one)).body.enabled === false, 8 * HOUR, 30);
    const shown = (await w.owner.client.get(one)).body;
    assert.match(shown.disabled_reason, /failed for 3 days/);
    const mail = await t.database.db
      .select({ to: mailOutbox.to_address, subject: mailOutbox.subject })
      .from(mailOutbox)
      .where(eq(mailOutbox.event, `webhook_endpoint.disabled:${endpoint.id}`));
    assert.deepEqual(mail, [{ to: w.owner.email, subject: 'Webhook endpoint disabled' }]);
    const enabled = await w.owner.client.patch(one, { enabled: true });
    assert.equal(enabled.body.enabled, true);
    assert.equal(enabled.body.disabled_reason, null);
    assert.equal(enabled.body.failing_since, null);
  });
});

describe('issue 29 defect 3: WEBHOOK_ALLOWED_NETWORKS never opens link-local or metadata addresses', () => {
  it('issue 29 defect 3: with the widest list (0.0.0.0/0, ::/0) set, metadata and link-local URLs are refused at save (400 url_refused naming why), by address and by name; a name that resolves there at delivery is refused after DNS and nothing is sent', async () => {
    const dns = await startDnsServer();
    const wide = await startApp(t.database, {
      env: {
        DNS_SERVERS: dns.address,
        WEBHOOK_ALLOWED_NETWORKS: '0.0.0.0/0,::/0',
        WEBHOOK_TIMEOUT_MS: '3000',
      },
    });
    after(() => wide.close());
    const w = await f.world();
    const client = clientFor(wide.app, w.owner.authorization);
    const suffix = randomUUID().slice(0, 8);
    dns.answer(`meta-${suffix}.example.test`, { a: ['169.254.169.254'] });
    dns.answer(`meta6-${suffix}.example.test`, { aaaa: ['fd00:ec2::254'] });
    dns.answer(`local-${suffix}.example.test`, { a: ['169.254.10.20'] });
    for (const [url, why] of [
      ['http://169.254.169.254/latest/meta-data', /cloud metadata/],
      ['http://[fd00:ec2::254]/latest/meta-data', /cloud metadata/],
      ['http://[::ffff:169.254.169.254]/', /cloud metadata/],
      ['http://[2002:a9fe:a9fe::1]/', /6to4 form of 169\.254\.169\.254/],
      ['http://169.254.10.20/hook', /link-local/],
      ['http://[fe80::1]/hook', /link-local/],
      [
        `http://meta-${suffix}.example.test/latest/meta-data`,
        /resolves to 169\.254\.169\.254, a cloud metadata/,
      ],
      [`http://meta6-${suffix}.example.test/`, /resolves to fd00:ec2::254, a cloud metadata/],
      [`http://local-${suffix}.example.test/`, /resolves to 169\.254\.10\.20, a link-local/],
    ] as const) {
      const res = await client.post(endpointsOf(w.account.id), { url });
      assert.equal(res.status, 400, `${url}: ${JSON.stringify(res.body)}`);
      assert.equal(res.body.errors?.[0]?.code, 'url_refused', JSON.stringify(res.body));
      assert.match(res.body.message, why, url);
      assert.match(res.body.message, /not opened by WEBHOOK_ALLOWED_NETWORKS/, url);
    }
    // What the list opens is opened: a private address, here the loopback receiver by name.
    const receiver = await startReceiver();
    after(() => receiver.close());
    const name = `hook-${suffix}.example.test`;
    dns.answer(name, { a: ['127.0.0.1'] });
    const url = receiver.url.replace('127.0.0.1', name);
    const saved = await client.post(endpointsOf(w.account.id), { url, event_types: ['site_report.sent'] });
    assert.equal(saved.status, 201, JSON.stringify(saved.body));
    const one = `${endpointsOf(w.account.id)}/${saved.body.id}`;
    const first = await client.post(`${one}/ping`);
    assert.equal(first.status, 202);
    await wide.runJobs();
    assert.equal(receiver.accepted.size, 1, 'delivered while the name resolves to an opened network');
    // The name now resolves to the metadata address: the delivery is refused after DNS.
    dns.answer(name, { a: ['169.254.169.254'] });
    const ping = await client.post(`${one}/ping`);
    assert.equal(ping.status, 202);
    await wide.runJobs();
    const log = await client.get(`${one}/deliveries`);
    const d = log.body.results.find((x: Json) => x.id === ping.body.id);
    assert.equal(d.last_status_code, null, JSON.stringify(d));
    assert.match(
      d.last_error,
      new RegExp(
        `^refused: ${name.replace(/\./g, '\\.')} resolves to 169\\.254\\.169\\.254, a cloud metadata address`,
      ),
    );
    assert.equal(receiver.accepted.size, 1, 'nothing more was sent');
  });

  it('issue 29 defect 3: the retired WEBHOOK_ALLOW_PRIVATE_TARGETS stops the start with a message naming WEBHOOK_ALLOWED_NETWORKS', async () => {
    await assert.rejects(
      startApp(t.database, { env: { WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true' } }),
      /WEBHOOK_ALLOW_PRIVATE_TARGETS is retired.*WEBHOOK_ALLOWED_NETWORKS/s,
    );
  });
});

if (TEST_DB === 'postgres') {
  describe('a worker process killed during a delivery (issue 22, PostgreSQL)', async () => {
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hostplane-hooks-'));
    after(() => fs.rmSync(tmp, { recursive: true, force: true }));
    const jobEnv = {
      JOB_EXPIRE_SECONDS: '2',
      JOB_MAINTENANCE_SECONDS: '1',
      JOB_RETRY_DELAY_SECONDS: '0',
      JOB_POLL_INTERVAL_MS: '100',
      JOB_SWEEP_INTERVAL_MS: '100',
      JOB_DRAIN_SECONDS: '1',
      WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8,::1',
    };
    const pg = await buildTestApp({ env: jobEnv });
    const pf = factories(pg);
    const workerEnv = {
      ...jobEnv,
      DATABASE_URL: pg.databaseUrl ?? '',
      DATA_DIR: path.join(tmp, 'worker'),
      HOSTPLANE_ADMIN_TOKEN: ADMIN_TOKEN,
      // The endpoint secrets are sealed with the app's key: the worker must open them.
      HOSTPLANE_SECRET_KEY: SECRET_KEY,
      SIMULATED_DURATIONS: 'provision=0,backup=0',
    };
    const startWorker = async () => {
      const run = runCli(['worker'], workerEnv);
      await run.waitFor(/Hostplane worker is running \d+ job queues on PostgreSQL/);
      return run;
    };
    const stop = async (run: Running, signal: NodeJS.Signals = 'SIGTERM') => {
      if (run.child.exitCode === null && run.child.signalCode === null) run.child.kill(signal);
      return run.exited;
    };
    async function until(what: string, check: () => boolean | Promise<boolean>, ms = 25_000) {
      const deadline = Date.now() + ms;
      while (!(await check())) {
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    }

    it('SIGKILL mid-delivery loses no event and the receiver dedupes to exactly once by webhook-id', async () => {
      const w = await readyWorld(pg, pf);
      // The first request is held open: the worker is inside its POST when it is killed.
      const receiver = await startReceiver({ hang: true });
      after(() => receiver.close());
      const endpoint = await createEndpoint(w.owner, w.account.id, {
        url: receiver.url,
        event_types: ['backup.completed', 'backup.started'],
      });
      let worker = await startWorker();
      try {
        const arrived = receiver.next();
        await backup(w);
        await arrived;
        worker.child.kill('SIGKILL');
        assert.equal(await worker.exited, 'SIGKILL');
        worker = await startWorker();
        await until('both events accepted', () => receiver.accepted.size === 2);
        const events = await w.owner.client.get(
          `/v1/accounts/${w.account.id}/events?type=backup.started&type=backup.completed`,
        );
        assert.deepEqual(
          [...receiver.accepted.keys()].sort(),
          events.body.results.map((e: Json) => e.id).sort(),
        );
        for (const r of receiver.requests) assert.ok(verifies(endpoint.secret, r));
        // The held request was sent again after the kill: same webhook-id, twice at the receiver.
        const first = receiver.requests[0];
        assert.ok(first);
        assert.ok(receiver.requests.filter((r) => r.id === first.id).length >= 2);
        await until('the log to show both delivered', async () => {
          const log = await w.owner.client.get(`${endpointsOf(w.account.id)}/${endpoint.id}/deliveries`);
          return log.body.results.every((d: Json) => d.status === 'delivered') && log.body.count === 2;
        });
        assert.equal(await stop(worker), 0);
      } finally {
        await stop(worker, 'SIGKILL');
      }
    });
  });
}

describe('metrics (issue 22)', () => {
  it('GET /metrics shows the webhook queue: deliveries and attempts by status, the oldest pending, disabled endpoints', async () => {
    const res = await t.anonymous.get('/metrics');
    assert.equal(res.status, 200);
    const text = String(res.raw.body);
    for (const status of ['pending', 'delivered', 'failed']) {
      assert.match(text, new RegExp(`hostplane_webhook_deliveries\\{status="${status}"\\} \\d+`));
      assert.match(text, new RegExp(`hostplane_webhook_delivery_attempts\\{status="${status}"\\} \\d+`));
    }
    assert.match(text, /hostplane_webhook_oldest_pending_seconds \d/);
    // The endpoint of the 3-day test was re-enabled; one disabled by its owner counts.
    assert.match(text, /hostplane_webhook_disabled_endpoints \d+/);
    const delivered = /hostplane_webhook_deliveries\{status="delivered"\} (\d+)/.exec(text);
    assert.ok(Number(delivered?.[1]) > 0, 'the deliveries of the tests above are counted');
  });
});

// Last: it moves the clock 31 days.
describe('retention (issue 22)', () => {
  it('the 30-day sweep deletes finished deliveries with their attempts', async () => {
    const before = await t.database.db.select({ id: webhookAttempts.id }).from(webhookAttempts);
    assert.ok(before.length > 0, 'the tests above logged attempts');
    t.clock.advance(31 * 24 * HOUR);
    await t.app.services.events.sweep(true);
    const left = await t.database.db
      .select({ status: webhookDeliveries.status })
      .from(webhookAttempts)
      .innerJoin(webhookDeliveries, eq(webhookDeliveries.id, webhookAttempts.delivery_id));
    assert.ok(
      left.every((r) => r.status === 'pending'),
      'only the attempts of still pending deliveries are left',
    );
  });
});
