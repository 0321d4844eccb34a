import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import { ROLES, type Role } from '../../src/auth/access.js';
import { factories, type Member } from '../support/factories.js';
import { basic, buildTestApp, clientFor, type Json, type Method, type Res } from '../support/harness.js';
import { operationPath } from '../support/jobs.js';

// G2/G3/G4/A1/A2/A3 for the site-transfer routes that the generated suite cannot build (they need a
// second account and a transfer): createSiteTransfer, getSiteTransfer, cancelSiteTransfer, and the
// transfer's operation. Every role holds the same role on the origin A and the destination D.
const t = await buildTestApp();
const f = factories(t);
const HOUR = 3600_000;
const BILLING: readonly Role[] = ['owner', 'full,billing'];

const a = await f.account();
const d = await f.account();
const ownerA = await f.user([
  { account_id: a.id, roles: 'owner' },
  { account_id: d.id, roles: 'owner' },
]);
const siteV = await f.site(ownerA.client, a.id, 'Visible');
const siteH = await f.site(ownerA.client, a.id, 'Hidden');
const installV = await f.install(ownerA.client, a.id, siteV.id, 'production');
await f.install(ownerA.client, a.id, siteH.id, 'production');
const members = {} as Record<Role, Member>;
for (const roles of ROLES) {
  const partial = roles.startsWith('partial');
  members[roles] = await f.user([
    { account_id: a.id, roles, ...(partial && { install_ids: [installV.id] }) },
    { account_id: d.id, roles, ...(partial && { install_ids: [] }) },
  ]);
}
const foreignAccount = await f.account();
const foreign = await f.user([
  { account_id: foreignAccount.id, roles: 'owner' },
  { account_id: d.id, roles: 'owner' },
]);
const stranger = await f.user([]);
const wrongPassword = clientFor(t.app, basic(ownerA.username, 'not-the-password'));

const scheduled = () => new Date(t.clock.now().getTime() + 2 * HOUR).toISOString();
const body = () => ({ destination_account_id: d.id, scheduled_time: scheduled() });

async function transferOn(siteId: string): Promise<Res> {
  const res = await ownerA.client.post(`/v1/sites/${siteId}/site_transfers`, body());
  assert.equal(res.status, 202, JSON.stringify(res.body));
  return res;
}

// One scheduled transfer per visible and hidden site, read by every caller (siteV keeps it active).
const onV = await transferOn(siteV.id);
const onH = await transferOn(siteH.id);

interface Route {
  operationId: string;
  method: Method;
  /** A fresh request on the visible site (a new site or transfer where the call changes state). */
  visible(): Promise<{ url: string; body?: Json }>;
  /** The call on siteV (every member sees it; partial ones through installV): a denied role's 403. */
  own: { url: string; body?: Json };
  /** The same call on the site partial members do not see. */
  hidden: { url: string; body?: Json };
  ok: number;
}

const ROUTES: Route[] = [
  {
    operationId: 'createSiteTransfer',
    method: 'POST',
    visible: async () => ({
      url: `/v1/sites/${(await f.site(ownerA.client, a.id)).id}/site_transfers`,
      body: body(),
    }),
    own: { url: `/v1/sites/${siteV.id}/site_transfers`, body: body() },
    hidden: { url: `/v1/sites/${siteH.id}/site_transfers`, body: body() },
    ok: 202,
  },
  {
    operationId: 'getSiteTransfer',
    method: 'GET',
    visible: async () => ({ url: `/v1/sites/${siteV.id}/site_transfers/${onV.body.id}` }),
    own: { url: `/v1/sites/${siteV.id}/site_transfers/${onV.body.id}` },
    hidden: { url: `/v1/sites/${siteH.id}/site_transfers/${onH.body.id}` },
    ok: 200,
  },
  {
    operationId: 'cancelSiteTransfer',
    method: 'DELETE',
    visible: async () => {
      const site = await f.site(ownerA.client, a.id);
      const res = await transferOn(site.id);
      return { url: `/v1/sites/${site.id}/site_transfers/${res.body.id}` };
    },
    own: { url: `/v1/sites/${siteV.id}/site_transfers/${onV.body.id}` },
    hidden: { url: `/v1/sites/${siteH.id}/site_transfers/${onH.body.id}` },
    ok: 204,
  },
];

const show = (res: Res) => `${res.status} ${JSON.stringify(res.body)}`;

describe('authorization of the site-transfer routes', () => {
  for (const route of ROUTES) {
    it(`G2 ${route.operationId}: no credentials or a wrong password is 401`, async () => {
      const req = await route.visible();
      for (const client of [t.anonymous, wrongPassword]) {
        const res = await client.request(route.method, req.url, req.body);
        assert.equal(res.status, 401, show(res));
        assert.deepEqual(res.body, { message: 'Bad Credentials' });
      }
    });

    it(`A1 A3 ${route.operationId}: owner and full,billing act (${route.ok}); full and partial roles get 403`, async () => {
      for (const roles of ROLES) {
        const req = BILLING.includes(roles) ? await route.visible() : route.own;
        const res = await members[roles].client.request(route.method, req.url, req.body);
        if (BILLING.includes(roles)) {
          assert.equal(res.status, route.ok, `${roles} ${show(res)}`);
        } else {
          assert.equal(res.status, 403, `${roles} ${show(res)}`);
          assert.deepEqual(res.body, { message: "You don't have permission to perform this action" });
        }
      }
    });

    it(`A2 ${route.operationId}: partial members do not see a site outside their install_ids (404)`, async () => {
      for (const roles of ['partial', 'partial,billing'] as const) {
        const res = await members[roles].client.request(route.method, route.hidden.url, route.hidden.body);
        assert.equal(res.status, 404, `${roles} ${show(res)}`);
        assert.deepEqual(res.body, { message: 'Not Found' });
      }
    });

    it(`G4 ${route.operationId}: another account's owner and a user of no account get 404`, async () => {
      const req = await route.visible();
      for (const member of [foreign, stranger]) {
        const res = await member.client.request(route.method, req.url, req.body);
        assert.equal(res.status, 404, show(res));
        assert.deepEqual(res.body, { message: 'Not Found' });
      }
    });
  }

  it('G4 getSiteTransfer and cancelSiteTransfer: an unknown id, another site’s transfer or a non-uuid is 404', async () => {
    for (const url of [
      `/v1/sites/${siteV.id}/site_transfers/${randomUUID()}`,
      `/v1/sites/${siteV.id}/site_transfers/${onH.body.id}`,
      `/v1/sites/${siteV.id}/site_transfers/not-a-uuid`,
      `/v1/sites/not-a-uuid/site_transfers/${onV.body.id}`,
    ]) {
      for (const method of ['GET', 'DELETE'] as const) {
        const res = await ownerA.client.request(method, url);
        assert.equal(res.status, 404, `${method} ${url} ${show(res)}`);
      }
    }
  });

  it('A3 the transfer’s operation (getOperation) is visible to the billing roles only', async () => {
    const path = operationPath(onV);
    for (const roles of ROLES) {
      const res = await members[roles].client.get(path);
      assert.equal(res.status, BILLING.includes(roles) ? 200 : 403, `${roles} ${show(res)}`);
    }
    for (const member of [foreign, stranger]) assert.equal((await member.client.get(path)).status, 404);
  });
});
