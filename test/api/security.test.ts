import assert from 'node:assert/strict';
import fs from 'node:fs';
import { describe, it } from 'node:test';
import { sql } from 'drizzle-orm';
import { can, ROLES } from '../../src/auth/access.js';
import { SCOPE_ACTIONS } from '../../src/auth/credentials.js';
import { queryRows } from '../../src/db/client.js';
import { startDnsServer } from '../support/dns-server.js';
import { factories, type Member } from '../support/factories.js';
import { ADMIN_TOKEN, basic, buildTestApp, clientFor, type Res } from '../support/harness.js';
import { b64, createPki } from '../support/pki.js';
import {
  ADMIN_ROUTES,
  API_ROUTES,
  type ApiRoute,
  buildWorld,
  certificateFor,
  DELEGATED_ROUTES,
  expectAccessError,
  expectBadCredentials,
  expectEmptyPage,
  expectForbidden,
  expectNotFound,
  fillPath,
  idsOf,
  NOT_PARTIAL,
  PARTIAL_ROLES,
  PUBLIC_ROUTES,
  resourcesFor,
  type Target,
  unlisted,
  unregistered,
} from '../support/security.js';

// The shared authorization suite: every route of the app against G2, G3, G4, A1 and A2, generated
// from the table in test/support/security.ts. One world (one member per role) serves every test.
// A real DNS server that knows no name (verification answers 200, still pending) and a test PKI, so
// allowed roles get genuine successes on the domain and certificate routes.
const dns = await startDnsServer();
const t = await buildTestApp({ env: { DNS_SERVERS: dns.address } });
const f = factories(t);
const w = await buildWorld(f, t);
const pki = createPki(t.clock.now());
certificateFor.body = (name) => {
  // EC keys: the routes' authorization is under test here, not key types (an RSA key is ~0.2 s of
  // openssl CPU per certificate; certificates.test.ts covers RSA).
  const leaf = pki.leaf({ names: [name], keyType: 'ec' });
  return {
    certificate: b64([leaf, pki.intermediate, pki.root].map((c) => c.certPem).join('')),
    private_key: b64(leaf.keyPem),
  };
};
const imported = await w.a.members.owner.client.post(
  `/v1/installs/${w.a.installV.id}/ssl_certificates/third_party`,
  certificateFor.body(w.a.domainV.name),
);
assert.equal(imported.status, 200, JSON.stringify(imported.body));

// Issue 22: scoped credentials in the table. Of A's owner: `read`; `admin` limited to installV; and
// one made by an owner of A who has since become a partial member (installV only): never wider than
// that user. Expired, revoked and IP-refused credentials are 401 everywhere.
async function scoped(member: Member, body: Record<string, unknown>) {
  const res = await member.client.post(`/v1/accounts/${w.a.account.id}/credentials`, body);
  assert.equal(res.status, 201, JSON.stringify(res.body));
  return { id: res.body.id as string, authorization: basic(res.body.username, res.body.password) };
}
const ownerA = w.a.members.owner;
const readCredential = (await scoped(ownerA, { scope: 'read' })).authorization;
const installCredential = (await scoped(ownerA, { scope: 'admin', install_ids: [w.a.installV.id] }))
  .authorization;
const demoted = await f.user([{ account_id: w.a.account.id, roles: 'owner' }]);
const partialMakerCredential = (await scoped(demoted, { scope: 'admin' })).authorization;
const demotion = await t.admin.put(`/admin/v1/users/${demoted.userId}/memberships/${w.a.account.id}`, {
  roles: 'partial',
  install_ids: [w.a.installV.id],
});
assert.equal(demotion.status, 200, JSON.stringify(demotion.body));
const expiring = await scoped(ownerA, {
  scope: 'admin',
  expires_at: new Date(t.clock.now().getTime() + 60_000).toISOString(),
});
const revoked = await scoped(ownerA, { scope: 'admin' });
assert.equal(
  (await ownerA.client.delete(`/v1/accounts/${w.a.account.id}/credentials/${revoked.id}`)).status,
  204,
);
const refused = await scoped(ownerA, { scope: 'admin', allowed_cidrs: ['203.0.113.0/24'] });
t.clock.advance(61_000);
const deadCredentials = [expiring.authorization, revoked.authorization, refused.authorization];

/** Issue 22: the audit events of one request (by its x-request-id). */
async function auditOf(res: Res) {
  const requestId = String(res.headers['x-request-id']);
  return queryRows<{
    action: string;
    status: number | null;
    account_id: string | null;
    actor_user_id: string;
  }>(
    t.database.db,
    sql`select action, status, account_id, actor_user_id from audit_events where request_id = ${requestId}`,
  );
}

/** Sends the route's request for `target` as `member` (or with a raw Authorization header). */
async function call(route: ApiRoute, target: Target, as: Member | string | null): Promise<Res> {
  const caller = as !== null && typeof as === 'object' ? as : undefined;
  const { url, body } = route.request(await resourcesFor(w, target, route.fresh, caller));
  const client = as === null ? t.anonymous : typeof as === 'string' ? clientFor(t.app, as) : as.client;
  return client.request(route.method, url, body);
}

const sorted = (ids: string[]) => [...ids].sort();

describe('coverage', () => {
  it('G2/G3/G4 every route the app registers is in the security table', () => {
    assert.ok(t.app.routes.length > 0);
    assert.deepEqual(unlisted(t.app.routes), [], 'add these routes to test/support/security.ts');
  });

  it('the security table lists only routes the app registers', () => {
    assert.deepEqual(unregistered(t.app.routes), []);
  });

  for (const route of API_ROUTES) {
    const { action } = route;
    if (!action) continue;
    it(`A1 ${route.operationId}: the table's roles are the ones ROLE_MATRIX grants ${action}`, () => {
      assert.deepEqual(
        ROLES.filter((role) => can(role, action)),
        ROLES.filter((role) => route.allowed.includes(role)),
      );
    });
  }
});

for (const route of API_ROUTES) {
  const op = route.operationId;
  describe(`${route.method} ${route.path} (${op})`, () => {
    // G2: credentials are checked before anything else, whatever the request addresses.
    it(`G2 ${op} without Authorization is 401 Bad Credentials`, async () => {
      expectBadCredentials(await call(route, 'own', null));
      if (route.method === 'GET') {
        const { url } = route.request(await resourcesFor(w, 'own'));
        expectBadCredentials(await t.anonymous.request('HEAD', url), 'HEAD');
      }
    });

    it(`G2 ${op} with a wrong password for a real username, or an unknown username, is 401`, async () => {
      expectBadCredentials(await call(route, 'own', basic(w.a.members.owner.username, 'wrong-password')));
      expectBadCredentials(await call(route, 'own', basic('hp_nobody', 'wrong-password')));
    });

    it(`G2 ${op} with a malformed or foreign Authorization header is 401`, async () => {
      const headers = [
        'Basic !!!',
        'Bearer x',
        `Bearer ${ADMIN_TOKEN}`,
        `Basic ${Buffer.from(w.a.members.owner.username).toString('base64')}`,
        basic(w.a.members.owner.username, ''),
        w.a.members.owner.authorization.replace('Basic', 'Digest'),
      ];
      for (const header of headers) expectBadCredentials(await call(route, 'own', header));
    });

    // A1 and G3: every role cell, in both directions.
    for (const role of ROLES) {
      if (route.allowed.includes(role)) {
        it(`A1 ${role} can ${op} (${route.ok})`, async () => {
          const res = await call(route, 'allowed', w.a.members[role]);
          assert.equal(res.status, route.ok, JSON.stringify(res.body));
          // Issue 22: every mutating call that succeeded is in the audit log, once.
          if (route.method !== 'GET') {
            const events = await auditOf(res);
            assert.equal(events.length, 1, `${op}: ${JSON.stringify(events)}`);
            assert.equal(events[0]?.action, op);
            assert.equal(events[0]?.status, route.ok);
            assert.equal(events[0]?.actor_user_id, w.a.members[role].userId);
            if (route.addressing !== 'none' && route.addressing !== 'user') {
              assert.equal(events[0]?.account_id, w.a.account.id, `${op}: the account of the event`);
            }
          }
        });
      } else {
        it(`G3 ${role} cannot ${op} (403)`, async () => {
          const res = await call(route, 'own', w.a.members[role]);
          expectForbidden(res);
          // Issue 22: a refused call changed nothing: no audit event.
          if (route.method !== 'GET') assert.deepEqual(await auditOf(res), []);
        });
      }
    }

    // Issue 22: scoped credentials.
    it(`G2 ${op} with an expired, revoked or IP-refused scoped credential is 401`, async () => {
      for (const authorization of deadCredentials)
        expectBadCredentials(await call(route, 'own', authorization));
    });
    if (route.allowed.includes('owner') && !route.fresh) {
      const readable = !route.action || SCOPE_ACTIONS.read.has(route.action);
      if (route.method === 'GET' && readable) {
        it(`S2 a read-scoped credential of the owner can ${op} (${route.ok})`, async () => {
          const res = await call(route, 'own', readCredential);
          assert.equal(res.status, route.ok, JSON.stringify(res.body));
        });
      }
    }
    if (
      route.allowed.includes('owner') &&
      (route.method !== 'GET' || (route.action && !SCOPE_ACTIONS.read.has(route.action)))
    ) {
      it(`S2 a read-scoped credential of the owner cannot ${op} (403)`, async () => {
        const res = await call(route, 'own', readCredential);
        expectForbidden(res);
        if (route.method !== 'GET') assert.deepEqual(await auditOf(res), []);
      });
    }
    if (route.addressing === 'site' || route.addressing === 'install') {
      it(`S2 a credential limited to installV gets 404 on ${op} for another install or its site`, async () => {
        expectNotFound(await call(route, 'hidden', installCredential));
      });
      it(`S3 a credential made by a user now partial gets 404 on ${op} outside that user's installs`, async () => {
        expectNotFound(await call(route, 'hidden', partialMakerCredential));
      });
    }
    if (!PARTIAL_ROLES.some((role) => route.allowed.includes(role))) {
      it(`S3 a credential made by a user now partial cannot ${op}, as that user cannot (403)`, async () => {
        expectForbidden(await call(route, 'own', partialMakerCredential));
      });
    }

    // G4: what a non-member of the addressed account gets.
    const outsiders: [string, () => Member][] = [
      ...ROLES.map((role): [string, () => Member] => [`${role} of another account`, () => w.a.members[role]]),
      ['a user without memberships', () => w.stranger],
    ];
    for (const [who, member] of outsiders) {
      switch (route.addressing) {
        case 'account':
        case 'site':
        case 'install':
          it(`G4 ${who} gets 404 on ${op}`, async () => {
            expectNotFound(await call(route, 'foreign', member()));
          });
          break;
        case 'create':
          it(`G4 ${who}: ${op} with a foreign account_id is 400 access_error`, async () => {
            expectAccessError(await call(route, 'foreign', member()));
          });
          break;
        case 'list':
          it(`G4 ${who}: ${op} filtered to a foreign account is an empty page`, async () => {
            expectEmptyPage(await call(route, 'foreign', member()));
          });
          break;
        case 'user':
          it(`G4 ${who} gets 404 on ${op} for another user's resource`, async () => {
            expectNotFound(await call(route, 'foreign', member()));
          });
          break;
        case 'none':
          break;
      }
    }
    if (['account', 'site', 'install', 'user'].includes(route.addressing)) {
      it(`G4 ${op} of an unknown id is 404, like a foreign one`, async () => {
        expectNotFound(await call(route, 'missing', w.a.members.owner));
      });
    }

    // A2: partial members do not see the installs outside their install_ids, nor sites without them.
    if (route.addressing === 'site' || route.addressing === 'install') {
      const what =
        route.addressing === 'site'
          ? 'a site holding none of its installs'
          : 'an install of its account outside its install_ids';
      for (const role of PARTIAL_ROLES) {
        it(`A2 ${role} gets 404 on ${op} for ${what}`, async () => {
          expectNotFound(await call(route, 'hidden', w.a.members[role]));
        });
      }
    }
  });
}

describe('A2 partial visibility in lists and site records', () => {
  for (const role of PARTIAL_ROLES) {
    it(`A2 ${role} sees only its installs in listInstalls`, async () => {
      const res = await w.a.members[role].client.get('/v1/installs');
      assert.equal(res.status, 200);
      assert.equal(res.body.count, 1);
      assert.deepEqual(idsOf(res), [w.a.installV.id]);
    });

    it(`A2 ${role} sees only its installs in listSites: the sites holding them, listing only them`, async () => {
      const res = await w.a.members[role].client.get(`/v1/sites?account_id=${w.a.account.id}`);
      assert.equal(res.status, 200);
      assert.equal(res.body.count, 1);
      assert.deepEqual(idsOf(res), [w.a.siteV.id]);
      assert.deepEqual(
        res.body.results[0].installs.map((i: { id: string }) => i.id),
        [w.a.installV.id],
      );
    });

    it(`A2 ${role} sees only its installs in getSite`, async () => {
      const res = await w.a.members[role].client.get(`/v1/sites/${w.a.siteV.id}`);
      assert.equal(res.status, 200);
      assert.deepEqual(
        res.body.installs.map((i: { id: string }) => i.id),
        [w.a.installV.id],
      );
    });
  }

  for (const role of NOT_PARTIAL) {
    it(`A2 ${role} sees every install and site of the account`, async () => {
      const client = w.a.members[role].client;
      const installs = idsOf(await client.get(`/v1/installs?account_id=${w.a.account.id}`));
      for (const install of [w.a.installV, w.a.installH1, w.a.installH2]) {
        assert.ok(installs.includes(install.id), install.name);
      }
      const sites = idsOf(await client.get(`/v1/sites?account_id=${w.a.account.id}`));
      assert.ok(sites.includes(w.a.siteV.id) && sites.includes(w.a.siteH.id));
      const site = await client.get(`/v1/sites/${w.a.siteV.id}`);
      assert.deepEqual(
        site.body.installs.map((i: { id: string }) => i.id),
        [w.a.installV.id, w.a.installH1.id],
      );
    });
  }

  it('A2 a partial user without install_ids sees no site and no install of the account', async () => {
    const client = w.partialNone.client;
    expectEmptyPage(await client.get('/v1/installs'));
    expectEmptyPage(await client.get('/v1/sites'));
    expectNotFound(await client.get(`/v1/sites/${w.a.siteV.id}`));
    expectNotFound(await client.get(`/v1/installs/${w.a.installV.id}`));
    assert.equal((await client.get(`/v1/accounts/${w.a.account.id}`)).status, 200);
  });

  it('A2 partial scoping is per account: partial in A and owner of B sees all of B, only its installs of A', async () => {
    const client = w.mixed.client;
    assert.deepEqual(idsOf(await client.get('/v1/installs')), sorted([w.a.installV.id, w.b.install.id]));
    const sites = await client.get('/v1/sites');
    assert.deepEqual(idsOf(sites), sorted([w.a.siteV.id, w.b.site.id]));
    const siteV = sites.body.results.find((s: { id: string }) => s.id === w.a.siteV.id);
    assert.deepEqual(
      siteV.installs.map((i: { id: string }) => i.id),
      [w.a.installV.id],
    );
    expectNotFound(await client.get(`/v1/installs/${w.a.installH1.id}`));
    expectNotFound(await client.get(`/v1/sites/${w.a.siteH.id}`));
    expectForbidden(await client.delete(`/v1/installs/${w.a.installV.id}`));
    assert.equal((await client.get(`/v1/installs/${w.b.install.id}`)).status, 200);
  });

  it('G4 a user without memberships sees no accounts, sites or installs', async () => {
    const client = w.stranger.client;
    expectEmptyPage(await client.get('/v1/accounts'));
    expectEmptyPage(await client.get('/v1/sites'));
    expectEmptyPage(await client.get('/v1/installs'));
    assert.equal((await client.get('/v1/user')).status, 200);
  });

  it('G4 listAccounts lists only the accounts the caller belongs to', async () => {
    for (const role of ROLES) {
      assert.deepEqual(idsOf(await w.a.members[role].client.get('/v1/accounts')), [w.a.account.id], role);
    }
  });
});

describe('admin surface', () => {
  for (const route of ADMIN_ROUTES) {
    const op = route.operationId;
    const send = (authorization?: string) =>
      clientFor(t.app, authorization).request(route.method, fillPath(route.path), {});
    it(`G2 admin ${op} without a token is 401`, async () => {
      expectBadCredentials(await send());
    });
    it(`G2 admin ${op} with a wrong Bearer token is 401`, async () => {
      expectBadCredentials(await send('Bearer not-the-admin-token'));
      expectBadCredentials(await send(`Bearer ${ADMIN_TOKEN}x`));
    });
    it(`G2 admin ${op} with a Basic credential is 401`, async () => {
      expectBadCredentials(await send(w.a.members.owner.authorization));
      expectBadCredentials(await send(`Basic ${Buffer.from(`admin:${ADMIN_TOKEN}`).toString('base64')}`));
    });
  }
});

describe('public routes', () => {
  for (const route of PUBLIC_ROUTES) {
    it(`G2 public ${route.method} ${route.path} answers without credentials`, async () => {
      const res = await t.anonymous.request(route.method, route.url ?? route.path);
      if (route.status) assert.equal(res.status, route.status, JSON.stringify(res.body));
      else assert.ok(res.status >= 200 && res.status < 400, `${res.status} ${JSON.stringify(res.body)}`);
    });
  }
});

describe('delegated routes', () => {
  for (const route of DELEGATED_ROUTES) {
    it(`G2/G4/A2 ${route.operationId} (${route.method} ${route.path}) is exercised by ${route.file}`, () => {
      const text = fs.readFileSync(route.file, 'utf8');
      assert.ok(
        text.includes(`operationId: '${route.operationId}'`),
        `${route.file} does not test ${route.operationId}`,
      );
    });
  }
});
