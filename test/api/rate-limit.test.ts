// test-db: postgres (the subject is the rate limiter, whose counters live in the process or Redis, not the database: docs/decisions.md #206)
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { describe, it, type TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { createRedis } from '../../src/redis.js';
import { assertErrorBody, rateLimitHeaders } from '../support/assertions.js';
import { factories } from '../support/factories.js';
import {
  ADMIN_TOKEN,
  basic,
  buildTestApp,
  type Method,
  type Res,
  type StartedApp,
  startApp,
  type TestAppOptions,
} from '../support/harness.js';
import { startTcpProxy } from '../support/tcp-proxy.js';

// Setup goes through an app without limits; each test then builds its own limited app on the same
// database (3 requests a minute), so counters never leak from one test into another.
const t = await buildTestApp();
const f = factories(t);
const acct = await f.account();
const member = () => f.user([{ account_id: acct.id, roles: 'owner' }]);
// Counters live in each test's own app (or Redis namespace), so the same members serve every test.
const alice = await member();
const bob = await member();
// Two sites, so that a page of one has a `next` link (the TRUST_PROXY tests read its scheme and host).
await f.site(alice.client, acct.id);
await f.site(alice.client, acct.id);

const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const LIMIT = 3;

let warmCounter = 0;

async function limitedApp(test: TestContext, options: TestAppOptions = {}): Promise<StartedApp> {
  const app = await startApp(t.database, {
    ...options,
    env: { ...options.env, RATE_LIMIT_PER_MINUTE: String(LIMIT) },
  });
  test.after(() => app.close());
  // A credential is counted as itself once verified (an auth-cache hit); its first request in a new
  // process counts for the client address. Verify both members from a throwaway address first, so
  // every test counts their requests from zero.
  for (const m of [alice, bob]) {
    const warm = await call(app, '/v1/user', {
      authorization: m.authorization,
      ip: `203.0.113.${++warmCounter}`,
    });
    assert.equal(warm.status, 200);
  }
  return app;
}

let ipCounter = 0;
/** A client address of its own, so that per-IP counters start at zero. */
const freshIp = () => `198.51.100.${++ipCounter}`;

interface CallOptions {
  authorization?: string;
  ip?: string;
  method?: Method;
  /** A raw body and its content type. */
  body?: [string, string];
  /** More request headers (X-Forwarded-For...). */
  headers?: Record<string, string>;
}

async function call(api: StartedApp, url: string, options: CallOptions = {}): Promise<Res> {
  const { authorization, ip = '127.0.0.1', method = 'GET', body, headers } = options;
  const raw = await api.app.inject({
    method,
    url,
    remoteAddress: ip,
    headers: {
      ...headers,
      ...(authorization && { authorization }),
      ...(body && { 'content-type': body[1] }),
    },
    ...(body && { payload: body[0] }),
  });
  return { status: raw.statusCode, body: raw.body ? JSON.parse(raw.body) : null, headers: raw.headers, raw };
}

function assertLimited(res: Res) {
  assertErrorBody(res, 429);
  assert.deepEqual(Object.keys(res.body), ['message']);
  const retryAfter = Number(res.headers['retry-after']);
  assert.ok(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 60, String(retryAfter));
  const headers = rateLimitHeaders(res);
  assert.equal(headers.limit, LIMIT);
  assert.equal(headers.remaining, 0);
}

describe('rate limits in one process (G9)', () => {
  it('G9 the 4th request of one credential within a minute is a 429 JSON {message} with Retry-After', async (test) => {
    const api = await limitedApp(test);
    const m = alice;
    for (let i = 1; i <= LIMIT; i++) {
      const res = await call(api, '/v1/sites', { authorization: m.authorization });
      assert.equal(res.status, 200);
      assert.deepEqual(rateLimitHeaders(res).remaining, LIMIT - i);
    }
    const limited = await call(api, '/v1/sites', { authorization: m.authorization });
    assertLimited(limited);
    assert.match(limited.body.message, /Too many requests/);
    // Still limited, whatever the route.
    assertLimited(await call(api, `/v1/accounts/${acct.id}`, { authorization: m.authorization }));
  });

  it('G9 RateLimit-Limit/Remaining/Reset are on every response: 200, 400, 401, 404 (route and method), 415, 429', async (test) => {
    const api = await limitedApp(test);
    const m = alice;
    const ip = freshIp();
    const responses = [
      await call(api, '/v1/status', { ip }),
      await call(api, '/v1/sites', { ip }), // 401: no credentials
      await call(api, '/v1/nope', { ip }), // 404: unknown route
      await call(api, '/v1/status', { ip }), // 429 for this IP
      await call(api, '/v1/sites?limit=abc', { authorization: m.authorization }), // 400
      await call(api, '/v1/sites', { authorization: m.authorization, method: 'PUT' }), // 404: method
      await call(api, '/v1/sites', {
        authorization: m.authorization,
        method: 'POST',
        body: ['x', 'text/plain'],
      }), // 415
    ];
    assert.deepEqual(
      responses.map((r) => r.status),
      [200, 401, 404, 429, 400, 404, 415],
    );
    for (const res of responses) {
      const headers = rateLimitHeaders(res);
      assert.equal(headers.limit, LIMIT);
      assert.ok(headers.reset >= 1 && headers.reset <= 60, String(headers.reset));
    }
    assert.deepEqual(
      responses.map((r) => rateLimitHeaders(r).remaining),
      [2, 1, 0, 0, 2, 1, 0],
    );
  });

  it('G9 each credential has its own counter', async (test) => {
    const api = await limitedApp(test);
    const a = alice;
    const b = bob;
    for (let i = 0; i < LIMIT; i++) await call(api, '/v1/sites', { authorization: a.authorization });
    assertLimited(await call(api, '/v1/sites', { authorization: a.authorization }));
    // Same client address, other credential: not limited.
    const other = await call(api, '/v1/sites', { authorization: b.authorization });
    assert.equal(other.status, 200);
    assert.equal(rateLimitHeaders(other).remaining, LIMIT - 1);
  });

  it('G9 a credential is counted across client addresses; requests without one are counted per address', async (test) => {
    const api = await limitedApp(test);
    const m = alice;
    for (let i = 0; i < LIMIT; i++)
      await call(api, '/v1/sites', { authorization: m.authorization, ip: freshIp() });
    assertLimited(await call(api, '/v1/sites', { authorization: m.authorization, ip: freshIp() }));

    const [ip1, ip2] = [freshIp(), freshIp()];
    for (let i = 0; i < LIMIT; i++) assert.equal((await call(api, '/v1/status', { ip: ip1 })).status, 200);
    assertLimited(await call(api, '/v1/status', { ip: ip1 }));
    assertLimited(await call(api, '/v1/swagger', { ip: ip1 }));
    assertLimited(await call(api, '/no/such/route', { ip: ip1 }));
    assert.equal((await call(api, '/v1/status', { ip: ip2 })).status, 200);
    // The limited address can still use its credential (its own counter).
    assert.equal((await call(api, '/v1/sites', { authorization: bob.authorization, ip: ip1 })).status, 200);
  });

  it('G9 unknown-route 404s count like any request, so probing for routes is limited too', async (test) => {
    const api = await limitedApp(test);
    const ip = freshIp();
    for (let i = 0; i < LIMIT; i++) {
      const res = await call(api, `/probe/${i}`, { ip });
      assertErrorBody(res, 404);
      assert.equal(rateLimitHeaders(res).remaining, LIMIT - 1 - i);
    }
    assertLimited(await call(api, '/probe/again', { ip }));
  });

  it('G9 wrong passwords are counted per client address before any password is checked (limiter hook runs first)', async (test) => {
    const api = await limitedApp(test);
    const m = alice;
    let verified = 0;
    const authenticator = api.app.services.authenticator;
    const verify = authenticator.verify;
    authenticator.verify = (username, password) => {
      verified++;
      return verify(username, password);
    };
    const attacker = freshIp();
    for (let i = 0; i < LIMIT; i++) {
      const res = await call(api, '/v1/sites', {
        authorization: basic(m.username, `wrong-${i}`),
        ip: attacker,
      });
      assertErrorBody(res, 401);
      rateLimitHeaders(res);
    }
    for (let i = 0; i < 5; i++) {
      assertLimited(
        await call(api, '/v1/sites', { authorization: basic(m.username, `wrong-x${i}`), ip: attacker }),
      );
    }
    assert.equal(verified, LIMIT, 'a limited request reached the password check');
  });

  it("G9 wrong passwords for a username cannot use up its owner's budget (no lockout by a third party)", async (test) => {
    const api = await limitedApp(test);
    const m = alice;
    for (let i = 0; i < LIMIT + 2; i++) {
      await call(api, '/v1/sites', { authorization: basic(m.username, `guess-${i}`), ip: freshIp() });
    }
    const owner = await call(api, '/v1/sites', { authorization: m.authorization });
    assert.equal(owner.status, 200);
    assert.equal(rateLimitHeaders(owner).remaining, LIMIT - 1);
  });

  it('G9 the admin surface is limited before its token is checked, per client address', async (test) => {
    const api = await limitedApp(test);
    const ip = freshIp();
    for (let i = 0; i < LIMIT; i++) {
      const res = await call(api, '/admin/v1/accounts', {
        method: 'POST',
        authorization: `Bearer wrong-${i}`,
        ip,
      });
      assertErrorBody(res, 401);
    }
    assertLimited(
      await call(api, '/admin/v1/accounts', { method: 'POST', authorization: `Bearer ${ADMIN_TOKEN}`, ip }),
    );
  });

  it('G9 health probes are never limited and carry no RateLimit headers (with or without a query)', async (test) => {
    const api = await limitedApp(test);
    const ip = freshIp();
    for (let i = 0; i < LIMIT + 3; i++) {
      for (const url of ['/healthz', '/readyz', '/healthz?probe=1']) {
        const res = await call(api, url, { ip });
        assert.equal(res.status, 200, url);
        assert.equal(res.headers['ratelimit-limit'], undefined, url);
      }
    }
    // ...and they do not use up the address's budget.
    assert.equal((await call(api, '/v1/status', { ip })).status, 200);
  });

  it('G9 behind a trusted load balancer (TRUST_PROXY) each client address of X-Forwarded-For has its own budget', async (test) => {
    const api = await limitedApp(test, { env: { TRUST_PROXY: '10.0.0.0/8, loopback' } });
    const balancer = '10.1.2.3';
    const from = (client: string) => ({ ip: balancer, headers: { 'x-forwarded-for': client } });
    for (let i = 0; i < LIMIT; i++)
      assert.equal((await call(api, '/v1/status', from('192.0.2.1'))).status, 200);
    assertLimited(await call(api, '/v1/status', from('192.0.2.1')));
    // Another client through the same balancer is not limited by the first one's requests.
    assert.equal((await call(api, '/v1/status', from('192.0.2.2'))).status, 200);
    // A chain: the client is the last address not of a trusted proxy.
    const chained = { ip: balancer, headers: { 'x-forwarded-for': '192.0.2.1, 127.0.0.1' } };
    assertLimited(await call(api, '/v1/status', chained));
    // Pagination links follow the balancer's scheme and host (G6).
    const page = await call(api, '/v1/sites?limit=1', {
      authorization: alice.authorization,
      ip: balancer,
      headers: { 'x-forwarded-proto': 'https', 'x-forwarded-host': 'api.example.test' },
    });
    assert.equal(page.status, 200);
    assert.match(String(page.body.next), /^https:\/\/api\.example\.test\/v1\/sites\?/);
  });

  it('G9 without TRUST_PROXY a forged X-Forwarded-For changes nothing: the budget is the connection address', async (test) => {
    const api = await limitedApp(test);
    const ip = freshIp();
    for (let i = 0; i < LIMIT; i++) {
      const forged = { ip, headers: { 'x-forwarded-for': `192.0.2.${10 + i}` } };
      assert.equal((await call(api, '/v1/status', forged)).status, 200);
    }
    assertLimited(await call(api, '/v1/status', { ip, headers: { 'x-forwarded-for': '192.0.2.99' } }));
    const page = await call(api, '/v1/sites?limit=1', {
      authorization: alice.authorization,
      headers: { 'x-forwarded-proto': 'https', 'x-forwarded-host': 'evil.example.test' },
    });
    assert.doesNotMatch(String(page.body.next), /evil/);
  });

  it('G9 RATE_LIMIT_PER_MINUTE=0 turns limits off: no 429 and no RateLimit headers', async (test) => {
    const api = await startApp(t.database, { env: { RATE_LIMIT_PER_MINUTE: '0' } });
    test.after(() => api.close());
    const m = alice;
    for (let i = 0; i < 10; i++) {
      const res = await call(api, '/v1/sites', { authorization: m.authorization });
      assert.equal(res.status, 200);
      assert.equal(res.headers['ratelimit-limit'], undefined);
    }
  });
});

/** Waits until the client answers a command (after a start or a reconnect). */
async function untilAnswering(redis: Redis) {
  for (;;) {
    try {
      if ((await redis.ping()) === 'PONG') return;
    } catch {
      // not connected yet
    }
    await sleep(50);
  }
}

/** Redis clients as `hostplane serve` makes them, in a key namespace of this test; removed afterwards. */
function redisClients(test: TestContext, url = REDIS_URL) {
  const keyPrefix = `hp-test:${randomBytes(6).toString('hex')}:`;
  const made: Redis[] = [];
  test.after(async () => {
    const cleaner = createRedis(REDIS_URL);
    try {
      await untilAnswering(cleaner);
      const keys = await cleaner.keys(`${keyPrefix}*`);
      if (keys.length > 0) await cleaner.del(...keys);
    } finally {
      cleaner.disconnect();
      for (const redis of made) redis.disconnect();
    }
  });
  return () => {
    const redis = createRedis(url, { keyPrefix });
    made.push(redis);
    return redis;
  };
}

async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return typeof address === 'object' && address ? address.port : 1;
}

describe('rate limits shared through Redis (G9, G11)', () => {
  it('G9 two API processes on one Redis share one counter per credential', async (test) => {
    const client = redisClients(test);
    const [r1, r2] = [client(), client()];
    await Promise.all([untilAnswering(r1), untilAnswering(r2)]);
    const one = await limitedApp(test, { redis: r1 });
    const two = await limitedApp(test, { redis: r2 });
    const m = alice;
    const other = bob;
    const seen = [
      await call(one, '/v1/sites', { authorization: m.authorization }),
      await call(two, '/v1/sites', { authorization: m.authorization }),
      await call(one, '/v1/sites', { authorization: m.authorization }),
    ];
    assert.deepEqual(
      seen.map((r) => [r.status, rateLimitHeaders(r).remaining]),
      [
        [200, 2],
        [200, 1],
        [200, 0],
      ],
    );
    assertLimited(await call(two, '/v1/sites', { authorization: m.authorization }));
    assertLimited(await call(one, '/v1/sites', { authorization: m.authorization }));
    assert.equal((await call(two, '/v1/sites', { authorization: other.authorization })).status, 200);
  });

  it('G11 Redis unreachable from the start: requests are served, never refused (fail open)', {
    timeout: 20_000,
  }, async (test) => {
    const redis = redisClients(test, `redis://127.0.0.1:${await closedPort()}`)();
    const api = await limitedApp(test, { redis });
    const m = alice;
    for (let i = 0; i < LIMIT + 3; i++) {
      const res = await call(api, '/v1/sites', { authorization: m.authorization });
      assert.equal(res.status, 200, res.raw.body);
      assert.equal(rateLimitHeaders(res).limit, LIMIT);
    }
  });

  for (const mode of ['refuse', 'blackhole', 'freeze'] as const) {
    it(`G11 Redis lost mid-flight (${mode}): requests are still served, and counted again once it is back`, {
      timeout: 30_000,
    }, async (test) => {
      const target = new URL(REDIS_URL);
      const proxy = await startTcpProxy(Number(target.port || 6379), target.hostname);
      test.after(() => proxy.close());
      const redis = redisClients(test, `redis://127.0.0.1:${proxy.port}`)();
      await untilAnswering(redis);
      const api = await limitedApp(test, { redis });
      const m = alice;
      assert.equal((await call(api, '/v1/sites', { authorization: m.authorization })).status, 200);

      await proxy.cut(mode);
      for (let i = 0; i < LIMIT + 2; i++) {
        const res = await call(api, '/v1/sites', { authorization: m.authorization });
        assert.equal(res.status, 200, res.raw.body);
      }

      await proxy.restore();
      await untilAnswering(redis);
      const fresh = bob;
      for (let i = 0; i < LIMIT; i++) {
        assert.equal((await call(api, '/v1/sites', { authorization: fresh.authorization })).status, 200);
      }
      assertLimited(await call(api, '/v1/sites', { authorization: fresh.authorization }));
    });
  }
});
