import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import type { Role } from '../../src/auth/access.js';
import { basic, type Client, clientFor, type Json, type TestApp, uniqueName } from './harness.js';

export interface Member {
  userId: string;
  email: string;
  username: string;
  /** The credential's password (a browser signs in with it: the console tests). */
  password: string;
  /** The `Authorization: Basic ...` value of the member's credential (for other app instances). */
  authorization: string;
  client: Client;
}

/** Factories over the admin API: every call makes fresh rows, so tests never clean up. */
export function factories(t: Pick<TestApp, 'admin' | 'app'>) {
  async function account(overrides: Record<string, unknown> = {}): Promise<Json> {
    const res = await t.admin.post('/admin/v1/accounts', {
      name: `Account ${randomBytes(3).toString('hex')}`,
      preferred_data_center: 'us-central',
      ...overrides,
    });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return res.body;
  }

  async function user(
    memberships: { account_id: string; roles: Role; install_ids?: string[] }[],
  ): Promise<Member> {
    const email = `u${randomBytes(5).toString('hex')}@example.test`;
    const created = await t.admin.post('/admin/v1/users', {
      email,
      first_name: 'Test',
      last_name: 'User',
      memberships,
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const cred = await t.admin.post(`/admin/v1/users/${created.body.id}/credentials`);
    assert.equal(cred.status, 201, JSON.stringify(cred.body));
    const authorization = basic(cred.body.username, cred.body.password);
    return {
      userId: created.body.id,
      email,
      username: cred.body.username,
      password: cred.body.password,
      authorization,
      client: clientFor(t.app, authorization),
    };
  }

  async function site(client: Client, accountId: string, name = `Site ${randomBytes(3).toString('hex')}`) {
    const res = await client.post('/v1/sites', { name, account_id: accountId });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return res.body;
  }

  async function install(
    client: Client,
    accountId: string,
    siteId: string | null,
    environment: string | null = 'production',
    name = uniqueName(),
  ) {
    const res = await client.post('/v1/installs', {
      name,
      account_id: accountId,
      ...(siteId && { site_id: siteId }),
      ...(environment && siteId && { environment }),
    });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return res.body;
  }

  /** An account with an owner, a site and a production install: the common starting point. */
  async function world(accountOverrides: Record<string, unknown> = {}) {
    const acct = await account(accountOverrides);
    const owner = await user([{ account_id: acct.id, roles: 'owner' }]);
    const s = await site(owner.client, acct.id);
    const inst = await install(owner.client, acct.id, s.id, 'production');
    return { account: acct, owner, site: s, install: inst };
  }

  return { account, user, site, install, world };
}
