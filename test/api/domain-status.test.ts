import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ROLES } from '../../src/auth/access.js';
import { startDnsServer } from '../support/dns-server.js';
import { addDomain, uniqueDomain } from '../support/domains.js';
import { factories } from '../support/factories.js';
import { buildTestApp, type Json } from '../support/harness.js';

// A real DNS server (dns2) answers A, AAAA and CNAME questions as each test sets them.
const dns = await startDnsServer();
const t = await buildTestApp({ env: { DNS_SERVERS: dns.address, DNS_TIMEOUT_MS: '200', DNS_TRIES: '1' } });
const f = factories(t);

const checkUrl = (installId: string, domainId: string) =>
  `/v1/installs/${installId}/domains/${domainId}/check_status`;
const reportUrl = (installId: string, reportId: string) =>
  `/v1/installs/${installId}/domains/check_status/${reportId}`;

/** A world with one domain (and the install's cname, `<name>.hostplane.app`). */
async function scene(overrides: Json = {}) {
  const w = await f.world(overrides);
  const name = uniqueDomain('st');
  const domain = await addDomain(w.owner.client, w.install.id, name);
  return { w, name, domain, cname: `${w.install.name}.hostplane.app` };
}

/** checkStatus, then the job, then the report; moves the clock past the 5-second limit after. */
async function check(w: Json, domainId: string) {
  const res = await w.owner.client.post(checkUrl(w.install.id, domainId));
  assert.equal(res.status, 202, JSON.stringify(res.body));
  assert.deepEqual(Object.keys(res.body), ['report_id']);
  const pending = await w.owner.client.get(reportUrl(w.install.id, res.body.report_id));
  assert.equal(pending.status, 200, JSON.stringify(pending.body));
  assert.equal(pending.body.report.complete, false);
  await t.runJobs();
  const done = await w.owner.client.get(reportUrl(w.install.id, res.body.report_id));
  assert.equal(done.status, 200);
  t.clock.advance(5000);
  return { pending: pending.body.report, report: done.body.report };
}

describe('checkStatus and getDomainReportStatus', () => {
  it('checkStatus: a CNAME to the install cname is pointed; the report is pending until its job runs', async () => {
    const { w, name, domain, cname } = await scene();
    dns.answer(name, { cname });
    dns.answer(cname, { a: ['192.0.2.10'] });
    const { pending, report } = await check(w, domain.id);
    assert.deepEqual(pending.domains, [{ name, install_name: w.install.name, complete: false }]);
    assert.equal(report.complete, true);
    assert.equal(report.install_name, w.install.name);
    assert.equal(report.admin, false);
    assert.equal(report.install_ip, undefined, 'no stable IPs on this plan');
    const [status] = report.domains;
    assert.equal(status.name, name);
    assert.equal(status.result, 'pointed');
    assert.equal(status.dns_error, false);
    assert.equal(status.cname, cname);
    assert.equal(status.a_record, '192.0.2.10');
    assert.deepEqual(status.ip, ['192.0.2.10']);
    assert.ok(dns.queries.includes(name), 'the check asked the configured DNS server');
  });

  it('checkStatus: A records on the install stable IPs are pointed; other addresses are not_pointed; AAAA is reported', async () => {
    const { w, name, domain } = await scene({ plan: 'premium' });
    const ips = await t.admin.patch(`/admin/v1/installs/${w.install.id}`, { stable_ips: ['198.51.100.7'] });
    assert.equal(ips.status, 200, JSON.stringify(ips.body));
    dns.answer(name, { a: ['198.51.100.7'], aaaa: ['2001:db8::7'] });
    const first = await check(w, domain.id);
    assert.equal(first.report.install_ip, '198.51.100.7');
    assert.equal(first.report.domains[0].result, 'pointed');
    assert.equal(first.report.domains[0].aaaa_record, '2001:db8::7');
    assert.deepEqual(first.report.domains[0].address, ['198.51.100.7', '2001:db8::7']);
    dns.answer(name, { a: ['203.0.113.99'] });
    const second = await check(w, domain.id);
    assert.equal(second.report.domains[0].result, 'not_pointed');
    assert.equal(second.report.domains[0].a_record, '203.0.113.99');
  });

  it('checkStatus: a name without records (NXDOMAIN) is not_found; a wildcard is checked on a name under it', async () => {
    const { w, domain } = await scene();
    const { report } = await check(w, domain.id);
    assert.equal(report.domains[0].result, 'not_found');
    assert.deepEqual(report.domains[0].ip, []);
    const base = uniqueDomain('wc');
    const wildcard = await addDomain(w.owner.client, w.install.id, `*.${base}`);
    dns.answer(`hostplane-wildcard-probe.${base}`, { cname: `${w.install.name}.hostplane.app` });
    const wc = await check(w, wildcard.id);
    assert.equal(wc.report.domains[0].name, `*.${base}`);
    assert.equal(wc.report.domains[0].result, 'pointed');
  });

  it('checkStatus: when every lookup attempt fails (SERVFAIL, timeout) the report completes with dns_error', async () => {
    for (const answer of [{ rcode: 'SERVFAIL' as const }, { hang: true as const }]) {
      const { w, name, domain } = await scene();
      dns.answer(name, answer);
      const { report } = await check(w, domain.id);
      assert.equal(report.complete, true);
      assert.equal(report.domains[0].dns_error, true, JSON.stringify(answer));
      assert.equal(report.domains[0].result, 'dns_error');
    }
  });

  it('checkStatus: one check every 5 seconds per install (429 with Retry-After), by the service clock', async () => {
    const { w, domain } = await scene();
    const other = await addDomain(w.owner.client, w.install.id, uniqueDomain('st'));
    assert.equal((await w.owner.client.post(checkUrl(w.install.id, domain.id))).status, 202);
    const limited = await w.owner.client.post(checkUrl(w.install.id, other.id));
    assert.equal(limited.status, 429);
    assert.match(limited.body.message, /one request every 5 seconds for each install/);
    assert.equal(limited.headers['retry-after'], '5');
    t.clock.advance(5000);
    assert.equal((await w.owner.client.post(checkUrl(w.install.id, other.id))).status, 202);
    // Another install is not limited by this one.
    const second = await scene();
    assert.equal(
      (await second.w.owner.client.post(checkUrl(second.w.install.id, second.domain.id))).status,
      202,
    );
    await t.runJobs();
  });

  it('getDomainReportStatus: an unknown report, or one of another install, is 404; a malformed id is 404 (no Bad Request)', async () => {
    const { w, domain } = await scene();
    const { w: w2, domain: d2 } = await scene();
    const res = await w.owner.client.post(checkUrl(w.install.id, domain.id));
    await w2.owner.client.post(checkUrl(w2.install.id, d2.id));
    await t.runJobs();
    const unknown = '00000000-0000-4000-8000-000000000000';
    assert.equal((await w.owner.client.get(reportUrl(w.install.id, unknown))).status, 404);
    // Another install of the same account: the report is not found under it.
    const sibling = await f.install(w.owner.client, w.account.id, w.site.id, 'staging');
    assert.equal((await w.owner.client.get(reportUrl(sibling.id, res.body.report_id))).status, 404);
    assert.equal((await w.owner.client.get(reportUrl(w.install.id, 'nope'))).status, 404);
    assert.equal((await w.owner.client.post(checkUrl(w.install.id, 'nope'))).status, 404);
    assert.equal((await w.owner.client.post(checkUrl(w.install.id, unknown))).status, 404);
    t.clock.advance(5000);
  });
});

describe('authorization of the domain status routes (G2, G4, A1, A2)', () => {
  it('G2/G4/A1/A2 every role of the account may check and read (no 403); others get 401/404', async () => {
    const { w, domain } = await scene();
    const foreign = await f.world();
    const outsider = await f.user([{ account_id: w.account.id, roles: 'partial', install_ids: [] }]);
    const first = await w.owner.client.post(checkUrl(w.install.id, domain.id));
    const routes = [
      {
        operationId: 'checkStatus',
        method: 'POST' as const,
        url: checkUrl(w.install.id, domain.id),
        ok: 202,
      },
      {
        operationId: 'getDomainReportStatus',
        method: 'GET' as const,
        url: reportUrl(w.install.id, first.body.report_id),
        ok: 200,
      },
    ];
    for (const role of ROLES) {
      const member = await f.user([
        {
          account_id: w.account.id,
          roles: role,
          ...(role.startsWith('partial') && { install_ids: [w.install.id] }),
        },
      ]);
      for (const route of routes) {
        t.clock.advance(5000);
        const res = await member.client.request(route.method, route.url);
        assert.equal(res.status, route.ok, `A1 ${role} ${route.operationId} ${JSON.stringify(res.body)}`);
      }
    }
    for (const route of routes) {
      t.clock.advance(5000);
      assert.equal((await t.anonymous.request(route.method, route.url)).status, 401, route.operationId);
      assert.equal(
        (await foreign.owner.client.request(route.method, route.url)).status,
        404,
        route.operationId,
      );
      assert.equal((await outsider.client.request(route.method, route.url)).status, 404, route.operationId);
    }
    await t.runJobs();
  });
});
