// test-db: postgres (the subject is password hashing under load: its gate, cache and counters live in the process, not the database: docs/decisions.md #206)
import assert from 'node:assert/strict';
import http from 'node:http';
import { describe, it, type TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'drizzle-orm';
import { hashPassword } from '../../src/auth/passwords.js';
import { assertErrorBody } from '../support/assertions.js';
import { factories } from '../support/factories.js';
import { basic, buildTestApp, type Res, type StartedApp, startApp } from '../support/harness.js';

// Issue 20, defects 1 and 6: password hashes under load. Setup goes through one app; each test builds
// its own app on the same database (its own credential cache, hash gate and failure counters), and
// counts hashes with hostplane_password_hashes_total on its GET /metrics.
// Production-cost hashes (the harness's default is cheaper): the credentials below are stored at it.
const t = await buildTestApp({ env: { PASSWORD_HASH_COST: '15' } });
const f = factories(t);
const acct = await f.account();
const member = () => f.user([{ account_id: acct.id, roles: 'owner' }]);
const alice = await member();
const bob = await member();
const carol = await member();
await f.site(alice.client, acct.id);

async function appWith(test: TestContext, env: Record<string, string> = {}): Promise<StartedApp> {
  // The production defaults (the harness turns the failure counters off for other files).
  const defaults = {
    PASSWORD_HASH_COST: '15',
    AUTH_CACHE_SECONDS: '10',
    AUTH_FAILURES_PER_IP: '20',
    AUTH_FAILURES_PER_IP_USER: '5',
    AUTH_FAILURES_PER_USER: '100',
  };
  const app = await startApp(t.database, { env: { ...defaults, ...env } });
  test.after(() => app.close());
  return app;
}

async function call(api: StartedApp, authorization: string, ip = '127.0.0.1', url = '/v1/sites?limit=100') {
  const raw = await api.app.inject({ method: 'GET', url, remoteAddress: ip, headers: { authorization } });
  return {
    status: raw.statusCode,
    body: raw.body ? JSON.parse(raw.body) : null,
    headers: raw.headers,
    raw,
  } satisfies Res;
}

/** One sample of the app's GET /metrics (0 when absent). */
async function metric(api: StartedApp, name: string, labels = ''): Promise<number> {
  const res = await api.anonymous.get('/metrics');
  assert.equal(res.status, 200);
  const line = String(res.raw.body)
    .split('\n')
    .find((l) => l.startsWith(`${name}${labels} `));
  return line ? Number(line.split(' ')[1]) : 0;
}
const hashes = (api: StartedApp) => metric(api, 'hostplane_password_hashes_total');

/** Polls until `read` answers `want` (a background refresh has no request to await). */
async function until(read: () => Promise<number>, want: number, what: string) {
  for (let i = 0; i < 500; i++) {
    if ((await read()) === want) return;
    await sleep(10);
  }
  assert.equal(await read(), want, what);
}

function assertRetryAfter(res: Res, status: 429 | 503) {
  assertErrorBody(res, status);
  const retryAfter = Number(res.headers['retry-after']);
  assert.ok(Number.isInteger(retryAfter) && retryAfter >= 1, `Retry-After ${res.headers['retry-after']}`);
}

const wrong = (username: string, i: number | string) => basic(username, `wrong-${i}`);

describe('issue 20 defect 1: a busy credential and its cache expiry', () => {
  it('issue 20 defect 1: 50 concurrent requests of one credential whose cache entry just expired cost one password hash (single flight), expiry after expiry', async (test) => {
    const api = await appWith(test);
    assert.equal((await call(api, alice.authorization)).status, 200);
    assert.equal(await hashes(api), 1);
    for (let expiry = 1; expiry <= 3; expiry++) {
      api.clock.advance(10_001);
      const answers = await Promise.all(Array.from({ length: 50 }, () => call(api, alice.authorization)));
      assert.deepEqual(new Set(answers.map((r) => r.status)), new Set([200]));
      assert.equal(await hashes(api), 1 + expiry, `hashes after expiry ${expiry}`);
    }
  });

  it('issue 20 defect 1: a wrong password is never cached as success; concurrent wrong tries share one hash, and a repeat of the same wrong pair against the same stored hash costs none', async (test) => {
    const api = await appWith(test);
    const answers = await Promise.all(Array.from({ length: 4 }, () => call(api, wrong(bob.username, 'x'))));
    assert.deepEqual(
      answers.map((r) => r.status),
      [401, 401, 401, 401],
    );
    assert.equal(await hashes(api), 1);
    // The same pair again: it failed against this stored hash, so it fails again (scrypt is
    // deterministic); answered 401 without a hash, and still counted as a failed sign-in.
    assertErrorBody(await call(api, wrong(bob.username, 'x')), 401);
    assert.equal(await hashes(api), 1);
    assert.equal(await metric(api, 'hostplane_auth_mismatches_remembered_total'), 1);
    // Another wrong password is a new guess: hashed. The right one is never refused by the memory.
    assertErrorBody(await call(api, wrong(bob.username, 'y')), 401);
    assert.equal(await hashes(api), 2);
    assert.equal((await call(api, bob.authorization)).status, 200);
    assert.equal(await hashes(api), 3);
    // An unknown username (checked against the dummy hash) is remembered the same way.
    assertErrorBody(await call(api, wrong('hp_nobody_here', 'x')), 401);
    assertErrorBody(await call(api, wrong('hp_nobody_here', 'x')), 401);
    assert.equal(await hashes(api), 4);
    // Past the cache's life the pair is hashed again.
    api.clock.advance(10_001);
    assertErrorBody(await call(api, wrong(bob.username, 'x')), 401);
    assert.equal(await hashes(api), 5);
  });

  it('issue 20 defect 1: a remembered wrong pair is hashed again once the stored hash changed (the memory never outlives the credential it was checked against)', async (test) => {
    const api = await appWith(test);
    const dave = await member();
    assertErrorBody(await call(api, wrong(dave.username, 'next')), 401);
    assertErrorBody(await call(api, wrong(dave.username, 'next')), 401);
    assert.equal(await hashes(api), 1);
    // The credential's stored hash becomes that of the password that failed (as a credential
    // replaced with another secret would): the same pair now signs in.
    const replaced = await hashPassword('wrong-next');
    await t.database.db.execute(
      sql`update credentials set password_hash = ${replaced} where username = ${dave.username}`,
    );
    assert.equal((await call(api, wrong(dave.username, 'next'))).status, 200);
    assert.equal(await hashes(api), 2);
  });

  it('issue 20 defect 1: refresh ahead keeps a credential in use fresh: 70 s of use in steps of 7 s (10 s cache) cost one hash', async (test) => {
    const api = await appWith(test);
    const refreshes = () => Promise.resolve(api.app.services.authenticator.stats().refreshes);
    assert.equal((await call(api, carol.authorization)).status, 200);
    for (let step = 1; step <= 10; step++) {
      // 7 s after the last check: within the entry's life, in its last third (refresh when < 1/3 left).
      api.clock.advance(7_000);
      assert.equal((await call(api, carol.authorization)).status, 200);
      await until(refreshes, step, `refresh ${step} done`);
    }
    assert.equal(await hashes(api), 1);
    assert.equal(await metric(api, 'hostplane_auth_refreshes_total'), 10);
    // Unused, it expires as before: the next request verifies with a hash again.
    api.clock.advance(10_001);
    assert.equal((await call(api, carol.authorization)).status, 200);
    assert.equal(await hashes(api), 2);
  });

  it('issue 20 defect 1: an invalidation wins over a refresh or verification in flight (a removed membership is not put back)', async (test) => {
    const api = await appWith(test);
    const dave = await member();
    assert.equal((await call(api, dave.authorization)).status, 200);
    api.clock.advance(7_000);
    // This request starts a refresh; the membership goes away while it may still run.
    const [seen] = await Promise.all([
      call(api, dave.authorization),
      // The removal commits in another app (another process): this one learns it from the epoch.
      t.admin.delete(`/admin/v1/users/${dave.userId}/memberships/${acct.id}`).then((r) => {
        assert.equal(r.status, 204);
      }),
    ]);
    assert.equal(seen.status, 200);
    api.clock.advance(1_001);
    const after = await call(api, dave.authorization, '127.0.0.1', `/v1/accounts/${acct.id}`);
    assert.notEqual(after.status, 200, 'a removed member still reads the account');
  });
});

describe('issue 20 defect 6: a wrong-password flood is bounded', () => {
  it('issue 20 defect 6: a wrong-password flood from one address gets 429s without hashing, and the owner (another address) still gets 200s', async (test) => {
    const api = await appWith(test);
    const attacker = '198.51.100.7';
    const statuses: number[] = [];
    for (let batch = 0; batch < 6; batch++) {
      const answers = await Promise.all(
        Array.from({ length: 10 }, (_, i) => call(api, wrong(alice.username, `${batch}-${i}`), attacker)),
      );
      for (const res of answers) {
        if (res.status === 429) assertRetryAfter(res, 429);
        else assertErrorBody(res, 401);
        statuses.push(res.status);
      }
      assert.equal((await call(api, alice.authorization, '192.0.2.10')).status, 200, 'the owner');
    }
    const spent = await hashes(api);
    // 5 failures per (address, username) a minute; one batch of 10 may be in flight when it is reached.
    assert.ok(spent <= 1 + 5 + 10, `hashes ${spent}`);
    assert.equal(statuses.filter((s) => s === 401).length + 1, spent);
    assert.ok(statuses.filter((s) => s === 429).length >= 40, statuses.join(' '));
    assert.equal(
      await metric(api, 'hostplane_auth_refused_total', '{reason="failures"}'),
      statuses.filter((s) => s === 429).length,
    );
    // Once the owner's cache entry expired, the right password from the flooding address waits for
    // the window (it would need a hash); from the owner's address it verifies.
    api.clock.advance(10_001);
    assertRetryAfter(await call(api, alice.authorization, attacker), 429);
    assert.equal((await call(api, alice.authorization, '192.0.2.10')).status, 200);
    api.clock.advance(50_001);
    assert.equal((await call(api, alice.authorization, attacker)).status, 200);
  });

  it('issue 20 defect 6: failures are counted per address across usernames, and per username across addresses, without locking the owner out of an address it used', async (test) => {
    const api = await appWith(test, { AUTH_FAILURES_PER_IP: '3', AUTH_FAILURES_PER_USER: '3' });
    // Per address: three unknown usernames, then even a fourth is refused before a hash.
    const ip = '198.51.100.20';
    for (let i = 0; i < 3; i++) assertErrorBody(await call(api, basic(`nobody${i}`, 'x'), ip), 401);
    assertRetryAfter(await call(api, basic('nobody9', 'x'), ip), 429);
    const spentByAddress = await hashes(api);
    assert.equal(spentByAddress, 3);

    // The owner signs in from its own address first (a known address for that username).
    assert.equal((await call(api, bob.authorization, '192.0.2.50')).status, 200);
    // Guesses at bob from three addresses: then a new address is refused for bob, before a hash...
    for (let i = 0; i < 3; i++)
      assertErrorBody(await call(api, wrong(bob.username, i), `203.0.113.${i}`), 401);
    assertRetryAfter(await call(api, wrong(bob.username, 9), '203.0.113.99'), 429);
    // ...another username from that address is not...
    assert.equal((await call(api, alice.authorization, '203.0.113.99')).status, 200);
    // ...and the owner's known address verifies (a fresh check: its cache entry expired).
    api.clock.advance(10_001);
    assert.equal((await call(api, bob.authorization, '192.0.2.50')).status, 200);
    // bob, three guesses, alice (a first verification in this app), bob again.
    assert.equal(await hashes(api), spentByAddress + 1 + 3 + 1 + 1);
  });

  it('issue 20 defect 6: a full hash queue answers 503 with Retry-After at once, without hashing', async (test) => {
    const api = await appWith(test, { AUTH_HASH_CONCURRENCY: '1', AUTH_HASH_QUEUE: '1' });
    const order: number[] = [];
    const answers = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        call(api, wrong(`flood${i}`, i), `198.51.100.${100 + i}`).then((res) => {
          order.push(res.status);
          return res;
        }),
      ),
    );
    const busy = answers.filter((r) => r.status === 503);
    assert.ok(busy.length >= 1, answers.map((r) => r.status).join(' '));
    for (const res of busy) assertRetryAfter(res, 503);
    const unauthenticated = answers.filter((r) => r.status === 401).length;
    assert.equal(busy.length + unauthenticated, 12);
    assert.equal(await hashes(api), unauthenticated);
    assert.equal(await metric(api, 'hostplane_auth_refused_total', '{reason="busy"}'), busy.length);
    // Refused at once: no 503 waited for the second hash of the single slot to end.
    const second401 = order.indexOf(401, order.indexOf(401) + 1);
    assert.ok(order.lastIndexOf(503) < second401, order.join(' '));
  });

  it('issue 20 defect 6: a request whose client disconnected while it waited for a hash slot is not hashed', async (test) => {
    const api = await appWith(test, { AUTH_HASH_CONCURRENCY: '1' });
    await api.app.listen({ port: 0, host: '127.0.0.1' });
    const address = api.app.server.address();
    const port = typeof address === 'object' && address ? address.port : 0;
    const stats = () => api.app.services.authenticator.stats();
    const entered = () => Promise.resolve(stats().hashes + stats().waiting + stats().abandoned);
    const send = (authorization: string) => {
      const req = http.request({
        port,
        host: '127.0.0.1',
        path: '/v1/sites',
        headers: { authorization },
        agent: false,
      });
      const done = new Promise<number>((resolve) => {
        req.on('response', (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        });
        req.on('error', () => resolve(0));
      });
      req.end();
      return { req, done };
    };
    // Ten verifications hold the single slot (distinct usernames: one address may fail 20 times).
    const occupiers = Array.from({ length: 10 }, (_, i) => send(wrong(`occupier${i}`, i)));
    await until(entered, 10, 'the occupiers wait for the slot');
    const gone = send(wrong('gone', 1));
    await until(entered, 11, 'the last request waits for the slot');
    gone.req.destroy();
    assert.deepEqual(await Promise.all(occupiers.map((o) => o.done)), Array(10).fill(401));
    await until(() => Promise.resolve(stats().abandoned), 1, 'the gone request was dropped');
    assert.equal(stats().hashes, 10);
    assert.equal(await metric(api, 'hostplane_auth_refused_total', '{reason="gone"}'), 1);
  });
});
