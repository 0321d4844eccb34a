import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { type Action, ROLES, type Role } from '../../src/auth/access.js';
import { MESSAGES } from '../../src/errors.js';
import { addDomain, uniqueDomain } from './domains.js';
import type { factories, Member } from './factories.js';
import type { Json, Method, Res, TestApp } from './harness.js';
import { testSshKey } from './ssh-keys.js';

/**
 * The security table: every route the app registers, with who may call it (design.md, "The contract
 * with clients"). test/api/security.test.ts generates the G2/G3/G4/A1/A2 tests from it and fails when
 * the app registers a route that is not listed here, so a new route cannot ship without them.
 */

export type Factories = ReturnType<typeof factories>;

/** The roles of each kind of action (A1; design.md role matrix). */
export const ALL_ROLES: readonly Role[] = ROLES;
/** Site and install creation, change and deletion: every role but the partial ones. */
export const NOT_PARTIAL: readonly Role[] = ['owner', 'full', 'full,billing'];
/** Billing actions (site transfers, A3/T1/T2): owner and full,billing only. */
export const BILLING: readonly Role[] = ['owner', 'full,billing'];
export const PARTIAL_ROLES: readonly Role[] = ROLES.filter((r) => r.startsWith('partial'));

/**
 * The fixture world, built once per test file.
 * Account A has one member per role; its partial members see only `installV`. `siteV` holds
 * `installV` (production) and `installH1` (staging, hidden from partial members); `siteH` holds only
 * `installH2` (so the whole site is hidden from them). Account B is foreign to every member of A.
 */
export interface World {
  a: {
    account: Json;
    members: Record<Role, Member>;
    siteV: Json;
    siteH: Json;
    installV: Json;
    installH1: Json;
    installH2: Json;
    /** A domain of installV (visible to every member), of installH1 (hidden from partial members). */
    domainV: Json;
    domainH: Json;
    /** A report schedule and a generated report of siteV (visible) and of siteH (hidden from partial members). */
    scheduleV: Json;
    scheduleH: Json;
    reportV: Json;
    reportH: Json;
    /** Issue 22: a scoped credential of A (made by its owner). */
    credential: Json;
  };
  b: {
    account: Json;
    owner: Member;
    site: Json;
    install: Json;
    domain: Json;
    sshKey: Json;
    schedule: Json;
    report: Json;
    credential: Json;
  };
  /** A valid credential of a user who belongs to no account. */
  stranger: Member;
  /** Partial member of A with no install_ids: sees nothing. */
  partialNone: Member;
  /** Partial member of A (installV only) and owner of B: partial scoping must stay per account. */
  mixed: Member;
  /** An empty site of A (for calls that are meant to succeed and change or delete it). */
  freshSite(): Promise<Json>;
  /** A production install of A on a fresh site of its own. */
  freshInstall(): Promise<Json>;
  /** A new domain of installV. */
  freshDomain(): Promise<Json>;
  /** A new report schedule of siteV. */
  freshSchedule(): Promise<Json>;
  /** A new partial member of A (installV), to change or remove. */
  freshAccountUser(): Promise<Member>;
  /** Issue 22: a new scoped credential of A (to revoke). */
  freshCredential(): Promise<Json>;
  /** A new SSH key of `member` (keys belong to users, not accounts). */
  freshSshKey(member: Member): Promise<Json>;
}

/** Registers a freshly generated SSH key for `member`. */
export async function addSshKey(member: Member): Promise<Json> {
  const res = await member.client.post('/v1/ssh_keys', { public_key: testSshKey('ed25519').line });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  return res.body;
}

/** A report schedule of a site, due at `runAt` (P1 answers only a message: found by its title). */
async function reportSchedule(member: Member, siteId: string, runAt: Date): Promise<Json> {
  const title = `Security ${randomUUID()}`;
  const res = await member.client.post('/v1/site_reports/schedules', {
    site_id: siteId,
    title,
    recipients: [{ email: 'security@example.test' }],
    next_scheduled_date: runAt.toISOString(),
  });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  const list = await member.client.get(`/v1/site_reports/schedules?site_id=${siteId}`);
  return list.body.schedules.find((s: Json) => s.title === title);
}

async function latestReport(member: Member, siteId: string): Promise<Json> {
  const res = await member.client.get(`/v1/site_reports?site_id=${siteId}`);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  assert.ok(res.body.reports[0], `a report of site ${siteId}`);
  return res.body.reports[0];
}

export async function buildWorld(f: Factories, t: Pick<TestApp, 'clock' | 'runJobs'>): Promise<World> {
  const accountA = await f.account();
  const ownerA = await f.user([{ account_id: accountA.id, roles: 'owner' }]);
  const siteV = await f.site(ownerA.client, accountA.id, 'Visible');
  const siteH = await f.site(ownerA.client, accountA.id, 'Hidden');
  const installV = await f.install(ownerA.client, accountA.id, siteV.id, 'production');
  const installH1 = await f.install(ownerA.client, accountA.id, siteV.id, 'staging');
  const installH2 = await f.install(ownerA.client, accountA.id, siteH.id, 'production');

  const member = (roles: Role) =>
    f.user([
      {
        account_id: accountA.id,
        roles,
        ...(roles.startsWith('partial') && { install_ids: [installV.id] }),
      },
    ]);
  const members = { owner: ownerA } as Record<Role, Member>;
  for (const role of ROLES) if (role !== 'owner') members[role] = await member(role);

  const accountB = await f.account();
  const ownerB = await f.user([{ account_id: accountB.id, roles: 'owner' }]);
  const siteB = await f.site(ownerB.client, accountB.id, 'Foreign');
  const installB = await f.install(ownerB.client, accountB.id, siteB.id, 'production');
  const domainV = await addDomain(ownerA.client, installV.id, uniqueDomain('v'));
  const domainH = await addDomain(ownerA.client, installH1.id, uniqueDomain('h'));
  const domainB = await addDomain(ownerB.client, installB.id, uniqueDomain('b'));
  const sshKeyB = await addSshKey(ownerB);

  const stranger = await f.user([]);
  const partialNone = await f.user([{ account_id: accountA.id, roles: 'partial', install_ids: [] }]);
  const mixed = await f.user([
    { account_id: accountA.id, roles: 'partial', install_ids: [installV.id] },
    { account_id: accountB.id, roles: 'owner' },
  ]);

  // Site reports: a schedule per site, run once (the clock moves an hour) so each has a report.
  const runAt = new Date(t.clock.now().getTime() + 3600_000);
  const scheduleV = await reportSchedule(ownerA, siteV.id, runAt);
  const scheduleH = await reportSchedule(ownerA, siteH.id, runAt);
  const scheduleB = await reportSchedule(ownerB, siteB.id, runAt);
  t.clock.advance(3600_000);
  await t.runJobs();
  const reports = {
    reportV: await latestReport(ownerA, siteV.id),
    reportH: await latestReport(ownerA, siteH.id),
    reportB: await latestReport(ownerB, siteB.id),
  };

  const makeCredential = async (owner: Member, accountId: string) => {
    const res = await owner.client.post(`/v1/accounts/${accountId}/credentials`, { scope: 'read' });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return res.body;
  };
  const credentialA = await makeCredential(ownerA, accountA.id);
  const credentialB = await makeCredential(ownerB, accountB.id);
  const freshSite = () => f.site(ownerA.client, accountA.id);
  return {
    a: {
      account: accountA,
      members,
      siteV,
      siteH,
      installV,
      installH1,
      installH2,
      domainV,
      domainH,
      scheduleV,
      scheduleH,
      reportV: reports.reportV,
      reportH: reports.reportH,
      credential: credentialA,
    },
    b: {
      account: accountB,
      owner: ownerB,
      site: siteB,
      install: installB,
      domain: domainB,
      sshKey: sshKeyB,
      schedule: scheduleB,
      report: reports.reportB,
      credential: credentialB,
    },
    stranger,
    partialNone,
    mixed,
    freshSite,
    freshInstall: async () => f.install(ownerA.client, accountA.id, (await freshSite()).id, 'production'),
    freshDomain: () => addDomain(ownerA.client, installV.id, uniqueDomain('f')),
    freshAccountUser: () =>
      f.user([{ account_id: accountA.id, roles: 'partial', install_ids: [installV.id] }]),
    freshSshKey: addSshKey,
    freshCredential: () => makeCredential(ownerA, accountA.id),
    freshSchedule: () => reportSchedule(ownerA, siteV.id, new Date(t.clock.now().getTime() + 86_400_000)),
  };
}

/**
 * Which resources a generated request addresses:
 * - `allowed`: A's resources, as a call by an allowed role that must succeed (fresh ones where the
 *   route changes or deletes them, see `fresh`);
 * - `own`: A's fixed resources, visible to every member of A (a denied role must get 403);
 * - `hidden`: A's resources that partial members do not see (A2: 404);
 * - `foreign`: B's resources (G4: 404, or the create/list forms);
 * - `missing`: ids that do not exist (G4: 404).
 */
export type Target = 'allowed' | 'own' | 'hidden' | 'foreign' | 'missing';

export interface Resources {
  account: { id: string };
  site: { id: string };
  install: { id: string };
  domain: { id: string; name?: string };
  /** A member of the account (account users routes). */
  accountUser: { id: string };
  /** An SSH key of the caller (`foreign`: of another user). */
  sshKey: { id: string };
  /** A report schedule and a report (their `uuid`s), of `site`. */
  schedule: { uuid: string };
  report: { uuid: string };
  /** Issue 22: a scoped credential of `account`. */
  credential: { id: string };
}

export type Fresh = 'site' | 'install' | 'domain' | 'accountUser' | 'sshKey' | 'schedule' | 'credential';

/** `caller`: who sends the request (fresh SSH keys are made for it). */
export async function resourcesFor(
  w: World,
  target: Target,
  fresh?: Fresh,
  caller?: Member,
): Promise<Resources> {
  const users = {
    accountUser: { id: w.a.members.partial.userId },
    sshKey: { id: randomUUID() },
    credential: { id: w.a.credential.id as string },
  };
  const own = {
    account: w.a.account,
    site: w.a.siteV,
    install: w.a.installV,
    domain: w.a.domainV,
    schedule: w.a.scheduleV,
    report: w.a.reportV,
    ...users,
  };
  switch (target) {
    case 'allowed':
      if (fresh === 'site') return { ...own, site: await w.freshSite() };
      if (fresh === 'install') {
        const install = await w.freshInstall();
        return { ...own, site: install.site, install };
      }
      if (fresh === 'domain') return { ...own, domain: await w.freshDomain() };
      if (fresh === 'accountUser')
        return { ...own, accountUser: { id: (await w.freshAccountUser()).userId } };
      if (fresh === 'sshKey') {
        if (!caller) throw new Error('a fresh SSH key needs the calling member');
        return { ...own, sshKey: { id: (await w.freshSshKey(caller)).uuid } };
      }
      if (fresh === 'schedule') return { ...own, schedule: await w.freshSchedule() };
      if (fresh === 'credential') return { ...own, credential: await w.freshCredential() };
      return own;
    case 'own':
      return own;
    case 'hidden':
      // installH1 sits on a site the partial member does see: the install itself must stay hidden.
      return {
        account: w.a.account,
        site: w.a.siteH,
        install: w.a.installH1,
        domain: w.a.domainH,
        schedule: w.a.scheduleH,
        report: w.a.reportH,
        ...users,
      };
    case 'foreign':
      return {
        account: w.b.account,
        site: w.b.site,
        install: w.b.install,
        domain: w.b.domain,
        accountUser: { id: w.b.owner.userId },
        sshKey: { id: w.b.sshKey.uuid },
        schedule: w.b.schedule,
        report: w.b.report,
        credential: w.b.credential,
      };
    case 'missing':
      return {
        account: { id: randomUUID() },
        site: { id: randomUUID() },
        install: { id: randomUUID() },
        domain: { id: randomUUID() },
        accountUser: { id: randomUUID() },
        sshKey: { id: randomUUID() },
        schedule: { uuid: randomUUID() },
        report: { uuid: randomUUID() },
        credential: { id: randomUUID() },
      };
  }
}

/**
 * How a route addresses what it acts on, which decides the G4/A2 expectations:
 * - `none`: nothing of an account (the caller's own data): no G4 case;
 * - `list`: a list with an `account_id` filter: a foreign account gives 200 with an empty page;
 * - `create`: `account_id` in the body; the spec's error table has no 404: 400 `access_error`;
 * - `account` / `site` / `install`: a path id: foreign or unknown is 404; site and install also A2;
 * - `user`: a resource of the calling user (SSH keys): another user's, or an unknown one, is 404.
 */
export type Addressing = 'none' | 'list' | 'create' | 'account' | 'site' | 'install' | 'user';

export interface RequestSpec {
  url: string;
  body?: unknown;
}

/** A /v1 route behind Basic auth. */
export interface ApiRoute {
  kind: 'api';
  method: Method;
  /** The path template exactly as the app registers it. */
  path: string;
  operationId: string;
  /** The ROLE_MATRIX action the route checks, if any (asserted to be granted to `allowed` only). */
  action?: Action;
  /** A1: the roles that may call it; every other role gets 403 (G3). Billing actions: `BILLING`. */
  allowed: readonly Role[];
  addressing: Addressing;
  /** The success status for allowed roles. */
  ok: 200 | 201 | 202 | 204;
  /** Calls that must succeed act on a fresh resource (the route changes or deletes it). */
  fresh?: Fresh;
  /** Builds the request. Bodies are valid, so a missing check would show as a 2xx, not a 400. */
  request(r: Resources): RequestSpec;
}

/** An /admin/v1 route behind the Bearer token. */
export interface AdminRoute {
  kind: 'admin';
  method: Method;
  path: string;
  operationId: string;
}

/** A route that needs no credentials. */
export interface PublicRoute {
  kind: 'public';
  method: Method;
  path: string;
  /** A concrete URL for path templates and wildcards (default: `path`). */
  url?: string;
  /** The status it answers that URL without credentials (default: any 2xx or 3xx). */
  status?: number;
}

/**
 * A /v1 route whose G2/G4/A1/A2 tests live in a dedicated file (its requests need a scene the
 * generated suite cannot build, e.g. two installs in one body); security.test.ts checks that the
 * file really exercises its operationId.
 */
export interface DelegatedRoute {
  kind: 'delegated';
  method: Method;
  path: string;
  operationId: string;
  /** The test file, relative to the repository root. */
  file: string;
}

export type SecuredRoute = ApiRoute | AdminRoute | PublicRoute | DelegatedRoute;

const api = (route: Omit<ApiRoute, 'kind'>): ApiRoute => ({ kind: 'api', ...route });

/**
 * A valid third-party certificate body for domainV, set by the security test once its PKI exists, so
 * an allowed role's import really succeeds (a missing check would show as a 200, not a 400).
 */
export const certificateFor: { body: (domainName: string) => unknown } = {
  body: () => {
    throw new Error('certificateFor.body is not set');
  },
};

const domainRoutes: ApiRoute[] = [
  api({
    method: 'GET',
    path: '/v1/installs/:install_id/domains',
    operationId: 'listDomains',
    action: 'installs:read',
    allowed: ALL_ROLES,
    addressing: 'install',
    ok: 200,
    request: (r) => ({ url: `/v1/installs/${r.install.id}/domains` }),
  }),
  api({
    method: 'POST',
    path: '/v1/installs/:install_id/domains',
    operationId: 'createDomain',
    action: 'installs:operate',
    allowed: ALL_ROLES,
    addressing: 'install',
    ok: 201,
    request: (r) => ({ url: `/v1/installs/${r.install.id}/domains`, body: { name: uniqueDomain('s') } }),
  }),
  api({
    method: 'POST',
    path: '/v1/installs/:install_id/domains/bulk',
    operationId: 'createBulkDomains',
    action: 'installs:operate',
    allowed: ALL_ROLES,
    addressing: 'install',
    ok: 201,
    request: (r) => ({
      url: `/v1/installs/${r.install.id}/domains/bulk`,
      body: { domains: [{ name: uniqueDomain('s') }, { name: uniqueDomain('s') }] },
    }),
  }),
  api({
    method: 'GET',
    path: '/v1/installs/:install_id/domains/:domain_id',
    operationId: 'getDomain',
    action: 'installs:read',
    allowed: ALL_ROLES,
    addressing: 'install',
    ok: 200,
    request: (r) => ({ url: `/v1/installs/${r.install.id}/domains/${r.domain.id}` }),
  }),
  api({
    method: 'PATCH',
    path: '/v1/installs/:install_id/domains/:domain_id',
    operationId: 'updateDomain',
    action: 'installs:operate',
    allowed: ALL_ROLES,
    addressing: 'install',
    ok: 200,
    fresh: 'domain',
    request: (r) => ({
      url: `/v1/installs/${r.install.id}/domains/${r.domain.id}`,
      body: { secure_all_urls: true },
    }),
  }),
  api({
    method: 'DELETE',
    path: '/v1/installs/:install_id/domains/:domain_id',
    operationId: 'deleteDomain',
    action: 'installs:operate',
    allowed: ALL_ROLES,
    addressing: 'install',
    ok: 204,
    fresh: 'domain',
    request: (r) => ({ url: `/v1/installs/${r.install.id}/domains/${r.domain.id}` }),
  }),
  api({
    method: 'POST',
    path: '/v1/installs/:install_id/domains/:domain_id/verification',
    operationId: 'verifyDomainTxtRecord',
    action: 'installs:operate',
    allowed: ALL_ROLES,
    addressing: 'install',
    // The suite's DNS server answers NXDOMAIN: a real lookup that leaves the domain pending (200).
    ok: 200,
    request: (r) => ({ url: `/v1/installs/${r.install.id}/domains/${r.domain.id}/verification` }),
  }),
  api({
    method: 'POST',
    path: '/v1/installs/:install_id/ssl_certificates/third_party',
    operationId: 'importThirdPartySSLCertificate',
    action: 'installs:operate',
    allowed: ALL_ROLES,
    addressing: 'install',
    ok: 200,
    request: (r) => ({
      url: `/v1/installs/${r.install.id}/ssl_certificates/third_party`,
      body: certificateFor.body(r.domain.name ?? 'unknown.example.test'),
    }),
  }),
  api({
    method: 'GET',
    path: '/v1/installs/:install_id/ssl_certificates',
    operationId: 'getInstallCertificates',
    action: 'installs:read',
    allowed: ALL_ROLES,
    addressing: 'install',
    ok: 200,
    request: (r) => ({ url: `/v1/installs/${r.install.id}/ssl_certificates` }),
  }),
  api({
    method: 'GET',
    path: '/v1/installs/:install_id/domains/:domain_id/ssl_certificate',
    operationId: 'getDomainCertificate',
    action: 'installs:read',
    allowed: ALL_ROLES,
    addressing: 'install',
    // 200 once the suite has imported a certificate covering domainV (see security.test.ts).
    ok: 200,
    request: (r) => ({ url: `/v1/installs/${r.install.id}/domains/${r.domain.id}/ssl_certificate` }),
  }),
];
function accountUserRoutes(): ApiRoute[] {
  const base = '/v1/accounts/:account_id/account_users';
  const one = (r: Resources) => `/v1/accounts/${r.account.id}/account_users/${r.accountUser.id}`;
  return [
    api({
      method: 'GET',
      path: base,
      operationId: 'listAccountUsers',
      action: 'users:read',
      allowed: NOT_PARTIAL,
      addressing: 'account',
      ok: 200,
      request: (r) => ({ url: `/v1/accounts/${r.account.id}/account_users` }),
    }),
    api({
      method: 'POST',
      path: base,
      operationId: 'createAccountUser',
      action: 'users:manage',
      allowed: NOT_PARTIAL,
      addressing: 'account',
      ok: 201,
      request: (r) => ({
        url: `/v1/accounts/${r.account.id}/account_users`,
        body: {
          user: {
            account_id: r.account.id,
            first_name: 'Suite',
            last_name: 'Member',
            email: `${randomUUID()}@security.test`,
            roles: 'partial',
            install_ids: [r.install.id],
          },
        },
      }),
    }),
    api({
      method: 'GET',
      path: `${base}/:user_id`,
      operationId: 'getAccountUser',
      action: 'users:read',
      allowed: NOT_PARTIAL,
      addressing: 'account',
      ok: 200,
      request: (r) => ({ url: one(r) }),
    }),
    api({
      method: 'PATCH',
      path: `${base}/:user_id`,
      operationId: 'updateAccountUser',
      action: 'users:manage',
      allowed: NOT_PARTIAL,
      addressing: 'account',
      ok: 200,
      fresh: 'accountUser',
      request: (r) => ({ url: one(r), body: { roles: 'partial,billing', install_ids: [r.install.id] } }),
    }),
    api({
      method: 'DELETE',
      path: `${base}/:user_id`,
      operationId: 'deleteAccountUser',
      action: 'users:manage',
      allowed: NOT_PARTIAL,
      addressing: 'account',
      ok: 204,
      fresh: 'accountUser',
      request: (r) => ({ url: one(r) }),
    }),
  ];
}

function sshKeyRoutes(): ApiRoute[] {
  return [
    api({
      method: 'GET',
      path: '/v1/ssh_keys',
      operationId: 'listSshKeys',
      allowed: ALL_ROLES,
      addressing: 'none',
      ok: 200,
      request: () => ({ url: '/v1/ssh_keys' }),
    }),
    api({
      method: 'POST',
      path: '/v1/ssh_keys',
      operationId: 'createSshKey',
      allowed: ALL_ROLES,
      addressing: 'none',
      ok: 201,
      request: () => ({ url: '/v1/ssh_keys', body: { public_key: testSshKey('ed25519').line } }),
    }),
    api({
      method: 'DELETE',
      path: '/v1/ssh_keys/:ssh_key_id',
      operationId: 'deleteSshKey',
      allowed: ALL_ROLES,
      addressing: 'user',
      ok: 204,
      fresh: 'sshKey',
      request: (r) => ({ url: `/v1/ssh_keys/${r.sshKey.id}` }),
    }),
  ];
}

const reportRoutes: ApiRoute[] = [
  api({
    method: 'GET',
    path: '/v1/site_reports/templates',
    operationId: 'listSiteReportTemplates',
    action: 'account:read',
    allowed: ALL_ROLES,
    addressing: 'account',
    ok: 200,
    request: (r) => ({ url: `/v1/site_reports/templates?account_id=${r.account.id}` }),
  }),
  api({
    method: 'GET',
    path: '/v1/site_reports/sections',
    operationId: 'getSiteReportsSections',
    allowed: ALL_ROLES,
    addressing: 'none',
    ok: 200,
    request: () => ({ url: '/v1/site_reports/sections' }),
  }),
  api({
    method: 'GET',
    path: '/v1/site_reports/schedules',
    operationId: 'getSiteReportsSchedules',
    action: 'reports:read',
    allowed: NOT_PARTIAL,
    addressing: 'site',
    ok: 200,
    request: (r) => ({ url: `/v1/site_reports/schedules?site_id=${r.site.id}` }),
  }),
  api({
    method: 'POST',
    path: '/v1/site_reports/schedules',
    operationId: 'createSiteReportSchedule',
    action: 'reports:manage',
    allowed: NOT_PARTIAL,
    addressing: 'site',
    ok: 201,
    request: (r) => ({
      url: '/v1/site_reports/schedules',
      body: { site_id: r.site.id, title: 'Security suite', recipients: [{ email: 'security@example.test' }] },
    }),
  }),
  api({
    method: 'PATCH',
    path: '/v1/site_reports/schedules/:schedule_id',
    operationId: 'updateSiteReportSchedule',
    action: 'reports:manage',
    allowed: NOT_PARTIAL,
    addressing: 'site',
    ok: 200,
    fresh: 'schedule',
    request: (r) => ({
      url: `/v1/site_reports/schedules/${r.schedule.uuid}`,
      body: { title: 'Renamed by the suite' },
    }),
  }),
  api({
    method: 'DELETE',
    path: '/v1/site_reports/schedules/:schedule_id',
    operationId: 'deleteSiteReportSchedule',
    action: 'reports:manage',
    allowed: NOT_PARTIAL,
    addressing: 'site',
    ok: 200,
    fresh: 'schedule',
    request: (r) => ({ url: `/v1/site_reports/schedules/${r.schedule.uuid}` }),
  }),
  api({
    method: 'GET',
    path: '/v1/site_reports',
    operationId: 'getSiteReports',
    action: 'reports:read',
    allowed: NOT_PARTIAL,
    addressing: 'site',
    ok: 200,
    request: (r) => ({ url: `/v1/site_reports?site_id=${r.site.id}` }),
  }),
  api({
    method: 'GET',
    path: '/v1/site_reports/:report_id/download',
    operationId: 'downloadSiteReport',
    action: 'reports:read',
    allowed: NOT_PARTIAL,
    addressing: 'site',
    ok: 200,
    request: (r) => ({ url: `/v1/site_reports/${r.report.uuid}/download` }),
  }),
];

const admin = (method: Method, path: string, operationId: string): AdminRoute => ({
  kind: 'admin',
  method,
  path,
  operationId,
});
const pub = (method: Method, path: string, url?: string, status?: number): PublicRoute => ({
  kind: 'public',
  method,
  path,
  ...(url && { url }),
  ...(status && { status }),
});

/** Issue 13: offload settings, archives, domain status reports, certificate orders. */
function surfaceRoutes(): SecuredRoute[] {
  const settings = { cloud: 's3', bucket: 'hostplane-media', bucket_region: 'us-east-1' };
  const offload = (r: Resources) => `/v1/installs/${r.install.id}/offload_settings/files`;
  return [
    api({
      method: 'GET',
      path: '/v1/installs/:install_id/offload_settings/files',
      operationId: 'getOffloadSettings',
      action: 'installs:read',
      allowed: ALL_ROLES,
      addressing: 'install',
      ok: 200,
      request: (r) => ({ url: offload(r) }),
    }),
    api({
      method: 'POST',
      path: '/v1/installs/:install_id/offload_settings/files',
      operationId: 'updateOffloadSettings',
      action: 'installs:operate',
      allowed: ALL_ROLES,
      addressing: 'install',
      ok: 202,
      request: (r) => ({ url: offload(r), body: { largefs_settings: settings } }),
    }),
    api({
      method: 'PATCH',
      path: '/v1/installs/:install_id/offload_settings/files',
      operationId: 'patchOffloadSettings',
      action: 'installs:operate',
      allowed: ALL_ROLES,
      addressing: 'install',
      ok: 202,
      request: (r) => ({ url: offload(r), body: { largefs_settings: settings } }),
    }),
    api({
      method: 'GET',
      path: '/v1/installs/:install_id/offload_settings/largefs_validation_file',
      operationId: 'getLargeFSValidationFile',
      action: 'installs:read',
      allowed: ALL_ROLES,
      addressing: 'install',
      ok: 200,
      request: (r) => ({ url: `/v1/installs/${r.install.id}/offload_settings/largefs_validation_file` }),
    }),
    api({
      method: 'GET',
      path: '/v1/installs/:install_id/archives',
      operationId: 'listArchives',
      action: 'installs:read',
      allowed: ALL_ROLES,
      addressing: 'install',
      ok: 200,
      request: (r) => ({ url: `/v1/installs/${r.install.id}/archives` }),
    }),
    api({
      method: 'POST',
      path: '/v1/installs/:install_id/domains/:domain_id/ssl_certificate',
      operationId: 'createDomainCertificateOrder',
      action: 'installs:operate',
      allowed: ALL_ROLES,
      addressing: 'install',
      // Accepted; the order fails later (the suite's domains are not verified): see certificate-orders.test.ts.
      ok: 202,
      request: (r) => ({
        url: `/v1/installs/${r.install.id}/domains/${r.domain.id}/ssl_certificate`,
        body: {
          email_address: 'holder@example.test',
          given_name: 'Jane',
          family_name: 'Doe',
          region_code: 'US',
        },
      }),
    }),
    // The signed link is the credential (no Basic auth): its tests need a completed backup.
    {
      kind: 'delegated',
      method: 'GET',
      path: '/v1/installs/:install_id/archives/:archive_id/download',
      operationId: 'downloadArchive',
      file: 'test/api/archives.test.ts',
    },
    // One check per install every 5 s (429), and reports of each target: tested role by role there.
    ...(
      [
        ['POST', '/v1/installs/:install_id/domains/:domain_id/check_status', 'checkStatus'],
        ['GET', '/v1/installs/:install_id/domains/check_status/:report_id', 'getDomainReportStatus'],
      ] as const
    ).map(
      ([method, path, operationId]): DelegatedRoute => ({
        kind: 'delegated',
        method,
        path,
        operationId,
        file: 'test/api/domain-status.test.ts',
      }),
    ),
  ];
}

export const ROUTES: readonly SecuredRoute[] = [
  // Accounts and the current user.
  api({
    method: 'GET',
    path: '/v1/accounts',
    operationId: 'listAccounts',
    allowed: ALL_ROLES,
    addressing: 'none',
    ok: 200,
    request: () => ({ url: '/v1/accounts' }),
  }),
  api({
    method: 'GET',
    path: '/v1/accounts/:account_id',
    operationId: 'getAccount',
    action: 'account:read',
    allowed: ALL_ROLES,
    addressing: 'account',
    ok: 200,
    request: (r) => ({ url: `/v1/accounts/${r.account.id}` }),
  }),
  api({
    method: 'GET',
    path: '/v1/user',
    operationId: 'getCurrentUser',
    allowed: ALL_ROLES,
    addressing: 'none',
    ok: 200,
    request: () => ({ url: '/v1/user' }),
  }),

  // Sites.
  api({
    method: 'GET',
    path: '/v1/sites',
    operationId: 'listSites',
    allowed: ALL_ROLES,
    addressing: 'list',
    ok: 200,
    request: (r) => ({ url: `/v1/sites?account_id=${r.account.id}` }),
  }),
  api({
    method: 'POST',
    path: '/v1/sites',
    operationId: 'createSite',
    action: 'sites:create',
    allowed: NOT_PARTIAL,
    addressing: 'create',
    ok: 201,
    request: (r) => ({ url: '/v1/sites', body: { name: 'Security suite', account_id: r.account.id } }),
  }),
  api({
    method: 'GET',
    path: '/v1/sites/:site_id',
    operationId: 'getSite',
    action: 'account:read',
    allowed: ALL_ROLES,
    addressing: 'site',
    ok: 200,
    request: (r) => ({ url: `/v1/sites/${r.site.id}` }),
  }),
  api({
    method: 'PATCH',
    path: '/v1/sites/:site_id',
    operationId: 'updateSite',
    action: 'sites:update',
    allowed: NOT_PARTIAL,
    addressing: 'site',
    ok: 200,
    fresh: 'site',
    request: (r) => ({ url: `/v1/sites/${r.site.id}`, body: { name: 'Renamed by the security suite' } }),
  }),
  api({
    method: 'DELETE',
    path: '/v1/sites/:site_id',
    operationId: 'deleteSite',
    action: 'sites:delete',
    allowed: NOT_PARTIAL,
    addressing: 'site',
    ok: 204,
    fresh: 'site',
    request: (r) => ({ url: `/v1/sites/${r.site.id}` }),
  }),

  // Installs.
  api({
    method: 'GET',
    path: '/v1/installs',
    operationId: 'listInstalls',
    allowed: ALL_ROLES,
    addressing: 'list',
    ok: 200,
    request: (r) => ({ url: `/v1/installs?account_id=${r.account.id}` }),
  }),
  api({
    method: 'POST',
    path: '/v1/installs',
    operationId: 'createInstall',
    action: 'installs:create',
    allowed: NOT_PARTIAL,
    addressing: 'create',
    ok: 201,
    fresh: 'site',
    // The development slot of siteV and of B's site stays free, so only authorization can refuse this.
    request: (r) => ({
      url: '/v1/installs',
      body: {
        name: `s${randomUUID().replaceAll('-', '').slice(0, 12)}`,
        account_id: r.account.id,
        site_id: r.site.id,
        environment: 'development',
      },
    }),
  }),
  api({
    method: 'GET',
    path: '/v1/installs/:install_id',
    operationId: 'getInstall',
    action: 'installs:read',
    allowed: ALL_ROLES,
    addressing: 'install',
    ok: 200,
    request: (r) => ({ url: `/v1/installs/${r.install.id}` }),
  }),
  api({
    method: 'PATCH',
    path: '/v1/installs/:install_id',
    operationId: 'updateInstall',
    action: 'installs:update',
    allowed: NOT_PARTIAL,
    addressing: 'install',
    ok: 200,
    fresh: 'install',
    request: (r) => ({ url: `/v1/installs/${r.install.id}`, body: { environment: 'development' } }),
  }),
  api({
    method: 'DELETE',
    path: '/v1/installs/:install_id',
    operationId: 'deleteInstall',
    action: 'installs:delete',
    allowed: NOT_PARTIAL,
    addressing: 'install',
    ok: 204,
    fresh: 'install',
    request: (r) => ({ url: `/v1/installs/${r.install.id}` }),
  }),

  // Domains and certificates (issue 4).
  ...domainRoutes,

  // Site reports (issue 12): schedules and reports are addressed through their site; partial
  // members get neither (a report covers every install of the site).
  ...reportRoutes,
  // Usage metrics and limits (issue 12): every member reads them; partial members their installs' only.
  ...(
    [
      ['/v1/accounts/:account_id/usage/insights', 'getAccountUsageInsights', '/usage/insights'],
      ['/v1/accounts/:account_id/usage/summary', 'getAccountUsageSummary', '/usage/summary'],
      ['/v1/accounts/:account_id/usage', 'getAccountUsageMetrics', '/usage'],
      ['/v1/accounts/:account_id/limits', 'getAccountsLimits', '/limits'],
    ] as const
  ).map(([path, operationId, suffix]) =>
    api({
      method: 'GET',
      path,
      operationId,
      action: 'account:read',
      allowed: ALL_ROLES,
      addressing: 'account',
      ok: 200,
      request: (r) => ({ url: `/v1/accounts/${r.account.id}${suffix}` }),
    }),
  ),

  // Asynchronous work (issue 5): authorization tested in test/api/jobs-authz.test.ts.
  ...(
    [
      ['GET', '/v1/operations/:operation_id', 'getOperation'],
      ['GET', '/v1/installs/:install_id/operations', 'listInstallOperations'],
      ['POST', '/v1/install_copy', 'copyInstall'],
      ['POST', '/v1/installs/:install_id/backups', 'createBackup'],
      ['GET', '/v1/installs/:install_id/backups', 'listBackups'],
      ['GET', '/v1/installs/:install_id/backups/:backup_id', 'showBackup'],
      ['POST', '/v1/installs/:install_id/backups/:backup_id/restore', 'restoreBackup'],
      ['POST', '/v1/installs/:install_id/usage/refresh_disk_usage', 'refreshEnvironmentDiskUsage'],
      ['POST', '/v1/accounts/:account_id/usage/refresh_disk_usage', 'refreshAccountDiskUsage'],
      ['GET', '/v1/installs/:install_id/usage', 'getInstallUsageMetrics'],
      ['POST', '/v1/installs/:install_id/purge_cache', 'purgeCache'],
    ] as const
  ).map(
    ([method, path, operationId]): DelegatedRoute => ({
      kind: 'delegated',
      method,
      path,
      operationId,
      file: 'test/api/jobs-authz.test.ts',
    }),
  ),

  // Issue 29 (defect 7): a single-use WordPress sign-in link, for every member who sees the install
  // (the simulated driver answers one); no scope grants it (S2: a read-scoped credential gets 403).
  api({
    method: 'POST',
    path: '/v1/installs/:install_id/wordpress_sign_in',
    operationId: 'createWordPressSignIn',
    action: 'installs:sign_in',
    allowed: ALL_ROLES,
    addressing: 'install',
    ok: 201,
    request: (r) => ({ url: `/v1/installs/${r.install.id}/wordpress_sign_in` }),
  }),

  // Site transfers (issue 11, A3/T1/T2): billing roles only.
  api({
    method: 'GET',
    path: '/v1/accounts/:account_id/site_transfers',
    operationId: 'listAccountSiteTransfers',
    action: 'transfers:manage',
    allowed: BILLING,
    addressing: 'account',
    ok: 200,
    request: (r) => ({ url: `/v1/accounts/${r.account.id}/site_transfers` }),
  }),
  api({
    method: 'GET',
    path: '/v1/sites/:site_id/site_transfers',
    operationId: 'listSiteTransfers',
    action: 'transfers:manage',
    allowed: BILLING,
    addressing: 'site',
    ok: 200,
    request: (r) => ({ url: `/v1/sites/${r.site.id}/site_transfers` }),
  }),
  // These need a second account and a transfer per case: test/api/site-transfers-authz.test.ts.
  ...(
    [
      ['POST', '/v1/sites/:site_id/site_transfers', 'createSiteTransfer'],
      ['GET', '/v1/sites/:site_id/site_transfers/:transfer_id', 'getSiteTransfer'],
      ['DELETE', '/v1/sites/:site_id/site_transfers/:transfer_id', 'cancelSiteTransfer'],
    ] as const
  ).map(
    ([method, path, operationId]): DelegatedRoute => ({
      kind: 'delegated',
      method,
      path,
      operationId,
      file: 'test/api/site-transfers-authz.test.ts',
    }),
  ),
  // Account users (U1-U4) and SSH keys (K1).
  ...accountUserRoutes(),
  ...sshKeyRoutes(),

  // The rest of the platform's surface (issue 13).
  ...surfaceRoutes(),

  // Issue 22: scoped credentials and the audit log (owners only).
  api({
    method: 'GET',
    path: '/v1/accounts/:account_id/credentials',
    operationId: 'listCredentials',
    action: 'credentials:manage',
    allowed: ['owner'],
    addressing: 'account',
    ok: 200,
    request: (r) => ({ url: `/v1/accounts/${r.account.id}/credentials` }),
  }),
  api({
    method: 'POST',
    path: '/v1/accounts/:account_id/credentials',
    operationId: 'createCredential',
    action: 'credentials:manage',
    allowed: ['owner'],
    addressing: 'account',
    ok: 201,
    request: (r) => ({ url: `/v1/accounts/${r.account.id}/credentials`, body: { scope: 'read' } }),
  }),
  api({
    method: 'GET',
    path: '/v1/accounts/:account_id/credentials/:credential_id',
    operationId: 'getCredential',
    action: 'credentials:manage',
    allowed: ['owner'],
    addressing: 'account',
    ok: 200,
    request: (r) => ({ url: `/v1/accounts/${r.account.id}/credentials/${r.credential.id}` }),
  }),
  api({
    method: 'DELETE',
    path: '/v1/accounts/:account_id/credentials/:credential_id',
    operationId: 'revokeCredential',
    action: 'credentials:manage',
    allowed: ['owner'],
    addressing: 'account',
    ok: 204,
    fresh: 'credential',
    request: (r) => ({ url: `/v1/accounts/${r.account.id}/credentials/${r.credential.id}` }),
  }),
  api({
    method: 'GET',
    path: '/v1/accounts/:account_id/audit_events',
    operationId: 'listAuditEvents',
    action: 'audit:read',
    allowed: ['owner'],
    addressing: 'account',
    ok: 200,
    request: (r) => ({ url: `/v1/accounts/${r.account.id}/audit_events` }),
  }),
  // Issue 22: events (every role; partial members see their installs' events only).
  api({
    method: 'GET',
    path: '/v1/accounts/:account_id/events',
    operationId: 'listEvents',
    action: 'account:read',
    allowed: ALL_ROLES,
    addressing: 'account',
    ok: 200,
    request: (r) => ({ url: `/v1/accounts/${r.account.id}/events` }),
  }),
  // Issue 22: webhook endpoints, owners only. A documentation address (TEST-NET-1) is public, so it
  // is accepted without WEBHOOK_ALLOW_PRIVATE_TARGETS; nothing is ever delivered to it here.
  api({
    method: 'GET',
    path: '/v1/accounts/:account_id/webhook_endpoints',
    operationId: 'listWebhookEndpoints',
    action: 'webhooks:manage',
    allowed: ['owner'],
    addressing: 'account',
    ok: 200,
    request: (r) => ({ url: `/v1/accounts/${r.account.id}/webhook_endpoints` }),
  }),
  api({
    method: 'POST',
    path: '/v1/accounts/:account_id/webhook_endpoints',
    operationId: 'createWebhookEndpoint',
    action: 'webhooks:manage',
    allowed: ['owner'],
    addressing: 'account',
    ok: 201,
    request: (r) => ({
      url: `/v1/accounts/${r.account.id}/webhook_endpoints`,
      body: { url: 'https://192.0.2.10/hook', event_types: ['backup.completed'] },
    }),
  }),
  // The endpoint's own routes need an endpoint of each account: tested role by role there.
  ...(
    [
      ['GET', '', 'getWebhookEndpoint'],
      ['PATCH', '', 'updateWebhookEndpoint'],
      ['DELETE', '', 'deleteWebhookEndpoint'],
      ['POST', '/rotate_secret', 'rotateWebhookEndpointSecret'],
      ['POST', '/ping', 'pingWebhookEndpoint'],
      ['GET', '/deliveries', 'listWebhookDeliveries'],
      ['GET', '/deliveries/:delivery_id', 'getWebhookDelivery'],
      ['POST', '/deliveries/:delivery_id/redeliver', 'redeliverWebhookDelivery'],
    ] as const
  ).map(
    ([method, tail, operationId]): DelegatedRoute => ({
      kind: 'delegated',
      method,
      path: `/v1/accounts/:account_id/webhook_endpoints/:webhook_endpoint_id${tail}`,
      operationId,
      file: 'test/api/webhooks.test.ts',
    }),
  ),

  // Operators (Bearer token).
  admin('POST', '/admin/v1/accounts', 'adminCreateAccount'),
  admin('POST', '/admin/v1/users', 'adminCreateUser'),
  admin('GET', '/admin/v1/users/:user_id', 'adminGetUser'),
  admin('PATCH', '/admin/v1/users/:user_id', 'adminUpdateUser'),
  admin('PUT', '/admin/v1/users/:user_id/memberships/:account_id', 'adminPutMembership'),
  admin('DELETE', '/admin/v1/users/:user_id/memberships/:account_id', 'adminDeleteMembership'),
  admin('POST', '/admin/v1/users/:user_id/credentials', 'adminCreateCredential'),
  admin('PATCH', '/admin/v1/sites/:site_id', 'adminUpdateSite'),
  admin('PATCH', '/admin/v1/installs/:install_id', 'adminUpdateInstall'),
  admin('GET', '/admin/v1/clock', 'adminGetClock'),
  admin('POST', '/admin/v1/clock', 'adminMoveClock'),
  admin('POST', '/admin/v1/faults', 'adminSetFault'),
  admin('GET', '/admin/v1/faults', 'adminListFaults'),
  admin('GET', '/admin/v1/mail', 'adminListMail'),
  admin('POST', '/admin/v1/usage', 'adminIngestUsage'),
  // Issue 30: hosting servers.
  admin('POST', '/admin/v1/servers', 'adminCreateServer'),
  admin('GET', '/admin/v1/servers', 'adminListServers'),
  admin('GET', '/admin/v1/servers/:server_id', 'adminGetServer'),
  admin('PATCH', '/admin/v1/servers/:server_id', 'adminUpdateServer'),
  admin('DELETE', '/admin/v1/servers/:server_id', 'adminDeleteServer'),
  admin('POST', '/admin/v1/servers/:server_id/enrolment', 'adminNewServerEnrolment'),
  admin('POST', '/admin/v1/servers/:server_id/revoke', 'adminRevokeServerCredential'),
  admin('GET', '/admin/v1/servers/:server_id/installs', 'adminListServerInstalls'),
  admin('GET', '/admin/v1/installs/:install_id/move', 'adminGetInstallMove'),
  admin('POST', '/admin/v1/installs/:install_id/move', 'adminMoveInstall'),
  admin('POST', '/admin/v1/installs/:install_id/move/cancel', 'adminCancelInstallMove'),
  admin('POST', '/admin/v1/servers/:server_id/drain', 'adminDrainServer'),
  admin('POST', '/admin/v1/servers/:server_id/undrain', 'adminUndrainServer'),
  // Issue 30: the agent protocol: a server's own credential (or the one-time enrolment token), tested
  // with two servers there (401 without, revoked or with a Basic/admin credential; 403 on another's call).
  ...(
    [
      ['POST', '/agent/v1/enrol', 'agentEnrol'],
      ['POST', '/agent/v1/heartbeat', 'agentHeartbeat'],
      ['POST', '/agent/v1/credential', 'agentRotateCredential'],
      ['POST', '/agent/v1/calls/fetch', 'agentFetchCalls'],
      ['POST', '/agent/v1/calls/:call_id/report', 'agentReportCall'],
      ['POST', '/agent/v1/ssh/decide', 'agentSshDecide'],
      ['POST', '/agent/v1/ssh/logins', 'agentSshLogins'],
      ['PUT', '/agent/v1/calls/:call_id/archive', 'agentPutArchivePart'],
      ['POST', '/agent/v1/calls/:call_id/archive/complete', 'agentCompleteArchive'],
      ['GET', '/agent/v1/calls/:call_id/archive', 'agentGetArchive'],
    ] as const
  ).map(
    ([method, path, operationId]): DelegatedRoute => ({
      kind: 'delegated',
      method,
      path,
      operationId,
      file: 'test/api/servers.test.ts',
    }),
  ),
  admin('PUT', '/admin/v1/accounts/:account_id/limits', 'adminPutAccountLimits'),
  admin('DELETE', '/admin/v1/accounts/:account_id/limits', 'adminResetAccountLimits'),

  // Public: no credentials.
  pub('GET', '/v1/status'),
  pub('GET', '/v1/swagger'),
  pub('GET', '/healthz'),
  pub('GET', '/readyz'),
  // Open unless METRICS_TOKEN is set (test/api/metrics.test.ts checks the token).
  pub('GET', '/metrics'),
  pub('GET', '/docs'),
  pub('HEAD', '/docs/'),
  pub('GET', '/docs/static/index.html'),
  pub('GET', '/docs/static/swagger-initializer.js'),
  pub('GET', '/docs/static/*', '/docs/static/swagger-ui.css'),
  pub('GET', '/docs/json'),
  pub('GET', '/docs/yaml'),
  // Issue 23: the web console's files (its API calls carry the credential, not these).
  pub('GET', '/console', '/console', 301),
  pub('GET', '/console/*', '/console/'),
  // An unknown token: a 404 (not a 401) shows it takes no credentials; invitations.test.ts accepts real ones.
  pub('POST', '/v1/invitations/:token/accept', `/v1/invitations/${'x'.repeat(43)}/accept`, 404),
];

export const API_ROUTES = ROUTES.filter((r): r is ApiRoute => r.kind === 'api');
export const ADMIN_ROUTES = ROUTES.filter((r): r is AdminRoute => r.kind === 'admin');
export const PUBLIC_ROUTES = ROUTES.filter((r): r is PublicRoute => r.kind === 'public');
export const DELEGATED_ROUTES = ROUTES.filter((r): r is DelegatedRoute => r.kind === 'delegated');

/** A path template with every `:param` replaced by a random uuid. */
export const fillPath = (path: string) => path.replace(/:[a-z_]+/g, () => randomUUID());

/**
 * The registered routes the table does not list. A HEAD route counts as listed when the GET of the
 * same path is (Fastify adds it; the G2 tests send HEAD to every authenticated GET route).
 */
export function unlisted(registered: readonly { method: string; url: string }[]): string[] {
  const listed = new Set(ROUTES.map((r) => `${r.method} ${r.path}`));
  return registered
    .filter(
      ({ method, url }) =>
        !listed.has(`${method} ${url}`) && !(method === 'HEAD' && listed.has(`GET ${url}`)),
    )
    .map(({ method, url }) => `${method} ${url}`);
}

/** Table entries the app does not register (a stale table). */
export function unregistered(registered: readonly { method: string; url: string }[]): string[] {
  const seen = new Set(registered.map((r) => `${r.method} ${r.url}`));
  return ROUTES.map((r) => `${r.method} ${r.path}`).filter((key) => !seen.has(key));
}

// Reusable checks: status and the exact body the rules fix.

const show = (res: Res) => `${res.status} ${JSON.stringify(res.body)}`;

/** G2: 401 with the bad-credentials message (HEAD answers carry no body). */
export function expectBadCredentials(res: Res, method: string = 'GET') {
  assert.equal(res.status, 401, show(res));
  if (method !== 'HEAD') assert.deepEqual(res.body, { message: MESSAGES.badCredentials });
}

/** G3: 403 with the no-permission message. */
export function expectForbidden(res: Res) {
  assert.equal(res.status, 403, show(res));
  assert.deepEqual(res.body, { message: MESSAGES.noPermission });
}

/** G4: 404 with the not-found message. */
export function expectNotFound(res: Res) {
  assert.equal(res.status, 404, show(res));
  assert.deepEqual(res.body, { message: MESSAGES.notFound });
}

/** G4 on create routes without a 404 in their error table: 400 `access_error` on `account_id`. */
export function expectAccessError(res: Res, field = 'account_id') {
  assert.equal(res.status, 400, show(res));
  assert.equal(res.body.errors[0].type, 'access_error');
  assert.equal(res.body.errors[0].field, field);
}

/** G4 on list routes filtered to an account the caller cannot see: an empty page, not a 404. */
export function expectEmptyPage(res: Res) {
  assert.equal(res.status, 200, show(res));
  assert.equal(res.body.count, 0);
  assert.deepEqual(res.body.results, []);
}

/** The ids of a list response's results, sorted. */
export const idsOf = (res: Res): string[] => res.body.results.map((r: { id: string }) => r.id).sort();
