import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { factories } from '../support/factories.js';
import { buildTestApp, type Json } from '../support/harness.js';

const t = await buildTestApp();
const f = factories(t);
// Fixed "today": 13 months before 2026-03-31 is 2025-02-28 (February has no 31st).
t.clock.set(new Date('2026-03-31T12:00:00Z'));

const METRICS = [
  'billable_visits',
  'network_cdn_bytes',
  'network_origin_bytes',
  'network_total_bytes',
  'request_origin_count',
  'storage_database_bytes',
  'storage_file_bytes',
  'visit_count',
];
const TWO_53_PLUS_1 = '9007199254740993';

async function ingest(rows: Json[]) {
  const res = await t.admin.post('/admin/v1/usage', { rows });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res;
}

/**
 * Account with four installs: P (production) and S (staging) on a transferable site (the default),
 * D (development) on a sandbox site, Q (production) on a non-transferable ("standard") site.
 */
async function scene() {
  const w = await f.world();
  const P = w.install;
  const S = await f.install(w.owner.client, w.account.id, w.site.id, 'staging');
  const sandbox = await f.site(w.owner.client, w.account.id);
  assert.equal((await t.admin.patch(`/admin/v1/sites/${sandbox.id}`, { sandbox: true })).status, 200);
  const D = await f.install(w.owner.client, w.account.id, sandbox.id, 'development');
  const standard = await f.site(w.owner.client, w.account.id);
  assert.equal((await t.admin.patch(`/admin/v1/sites/${standard.id}`, { transferable: false })).status, 200);
  const Q = await f.install(w.owner.client, w.account.id, standard.id, 'production');
  await ingest([
    { install_id: P.id, date: '2026-03-30', visit_count: TWO_53_PLUS_1, network_total_bytes: TWO_53_PLUS_1 },
    { install_id: P.id, date: '2026-03-29', visit_count: 1 },
    { install_id: Q.id, date: '2026-03-30', visit_count: TWO_53_PLUS_1, network_total_bytes: '0' },
    { install_id: S.id, date: '2026-03-30', visit_count: 0 },
    { install_id: P.id, date: '2026-03-01', storage_file_bytes: 100, visit_count: 5 },
    { install_id: P.id, date: '2026-02-01', storage_file_bytes: 150 },
    { install_id: D.id, date: '2026-01-10', storage_file_bytes: 7, storage_database_bytes: 3 },
  ]);
  return { ...w, P, S, D, Q };
}

const s = await scene();
const insightsOf = (q = '') => s.owner.client.get(`/v1/accounts/${s.account.id}/usage/insights${q}`);
const summaryOf = (q = '') => s.owner.client.get(`/v1/accounts/${s.account.id}/usage/summary${q}`);

describe('getAccountUsageInsights', () => {
  it('M5 eight metrics, each a total with environment and site type breakdowns; int64 sums above 2^53 exact as strings', async () => {
    const res = await insightsOf();
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.deepEqual(Object.keys(res.body).sort(), METRICS);
    assert.deepEqual(res.body.visit_count, {
      total: '18014398509481987',
      environment_types: { production: '18014398509481987', staging: '0', development: null },
      site_types: { standard: TWO_53_PLUS_1, transferable: '9007199254740994', sandbox: null },
    });
    assert.deepEqual(res.body.network_total_bytes, {
      total: TWO_53_PLUS_1,
      environment_types: { production: TWO_53_PLUS_1, staging: null, development: null },
      site_types: { standard: '0', transferable: TWO_53_PLUS_1, sandbox: null },
    });
  });

  it("M5 storage metrics are the sum of each install's latest figure on or before last_date", async () => {
    const res = await insightsOf();
    assert.deepEqual(res.body.storage_file_bytes, {
      total: '107',
      environment_types: { production: '100', staging: null, development: '7' },
      site_types: { standard: null, transferable: '100', sandbox: '7' },
    });
    const earlier = await insightsOf('?first_date=2026-02-01&last_date=2026-02-28');
    assert.equal(earlier.body.storage_file_bytes.total, '157');
    assert.equal(earlier.body.storage_database_bytes.total, '3');
  });

  it('M5 null means no data in the range, "0" reported zeros: an account without usage is all null', async () => {
    const w = await f.world();
    const res = await w.owner.client.get(`/v1/accounts/${w.account.id}/usage/insights`);
    assert.equal(res.status, 200);
    for (const m of METRICS) {
      assert.deepEqual(res.body[m], {
        total: null,
        environment_types: { production: null, staging: null, development: null },
        site_types: { standard: null, transferable: null, sandbox: null },
      });
    }
    await ingest([{ install_id: w.install.id, date: '2026-03-31', billable_visits: 0 }]);
    const zero = await w.owner.client.get(`/v1/accounts/${w.account.id}/usage/insights`);
    assert.equal(zero.body.billable_visits.total, '0');
    assert.equal(zero.body.visit_count.total, null);
  });

  it('A2 a partial member sees only the usage of its installs', async () => {
    const partial = await f.user([{ account_id: s.account.id, roles: 'partial', install_ids: [s.P.id] }]);
    const res = await partial.client.get(`/v1/accounts/${s.account.id}/usage/insights`);
    assert.equal(res.status, 200);
    assert.equal(res.body.visit_count.total, '9007199254740994');
    assert.equal(res.body.visit_count.environment_types.staging, null);
    assert.equal(res.body.storage_file_bytes.total, '100');
    const summary = await partial.client.get(`/v1/accounts/${s.account.id}/usage/summary`);
    assert.equal(summary.body.visit_count.sum, '9007199254740994');
  });
});

describe('getAccountUsageSummary', () => {
  it('M6 eight rollups: traffic sum and average per day with data, storage latest {date, value}', async () => {
    const res = await summaryOf();
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.deepEqual(Object.keys(res.body).sort(), METRICS);
    // 2^53+1 (P) + 1 (P, the day before) + 2^53+1 (Q) over two days with data: half up.
    assert.deepEqual(res.body.visit_count, {
      average: '9007199254740994',
      sum: '18014398509481987',
      latest: null,
    });
    assert.deepEqual(res.body.storage_file_bytes, {
      average: null,
      sum: null,
      latest: { date: '2026-03-01', value: '107' },
    });
    assert.deepEqual(res.body.storage_database_bytes, {
      average: null,
      sum: null,
      latest: { date: '2026-01-10', value: '3' },
    });
    assert.deepEqual(res.body.billable_visits, { average: null, sum: null, latest: null });
  });
});

describe('M1-M4 date ranges of insights and summary', () => {
  const both = [insightsOf, summaryOf];
  const field = (res: Json) => res.body.errors?.[0]?.field;

  it('M4 without dates: the last 30 days, today included (day 31 back is left out)', async () => {
    for (const get of both) {
      const byDefault = await get();
      assert.deepEqual(byDefault.body, (await get('?first_date=2026-03-02&last_date=2026-03-31')).body);
      assert.notDeepEqual(byDefault.body, (await get('?first_date=2026-03-01&last_date=2026-03-31')).body);
    }
    assert.equal(
      (await insightsOf('?first_date=2026-03-01&last_date=2026-03-01')).body.visit_count.total,
      '5',
    );
  });

  it('M2 31 days are allowed, 32 are a 400 on last_date', async () => {
    for (const get of both) {
      assert.equal((await get('?first_date=2026-03-01&last_date=2026-03-31')).status, 200);
      const res = await get('?first_date=2026-02-28&last_date=2026-03-31');
      assert.equal(res.status, 400);
      assert.equal(field(res), 'last_date');
      assert.match(res.body.message, /31 days/);
    }
  });

  it('M3 13 months to the day: first_date 2025-02-28 passes on 2026-03-31, 2025-02-27 is a 400', async () => {
    for (const get of both) {
      assert.equal((await get('?first_date=2025-02-28&last_date=2025-03-10')).status, 200);
      const res = await get('?first_date=2025-02-27&last_date=2025-03-10');
      assert.equal(res.status, 400);
      assert.equal(field(res), 'first_date');
      assert.match(res.body.message, /13 months/);
    }
  });

  it('M1 one date missing is a 400 naming the missing one; the body is the G7 shape', async () => {
    for (const get of both) {
      const res = await get('?first_date=2026-03-01');
      assert.equal(res.status, 400);
      assert.deepEqual(res.body.errors, [
        {
          resource: 'usage',
          field: 'last_date',
          type: 'invalid_value',
          code: 'invalid_value',
          message: 'first_date and last_date must be given together, or neither',
        },
      ]);
      assert.equal(field(await get('?last_date=2026-03-01')), 'first_date');
    }
  });

  it('M1 a reversed range, a malformed date and a date that does not exist are 400s', async () => {
    for (const get of both) {
      const reversed = await get('?first_date=2026-03-10&last_date=2026-03-01');
      assert.equal(reversed.status, 400);
      assert.equal(field(reversed), 'last_date');
      assert.equal((await get('?first_date=03/01/2026&last_date=2026-03-02')).status, 400);
      assert.equal((await get('?first_date=2026-02-29&last_date=2026-03-02')).status, 400);
    }
  });
});

describe('getInstallUsageMetrics', () => {
  it('M9 most recent first, storage filled from the last known day (before the range too), with its rollup', async () => {
    const res = await s.owner.client.get(
      `/v1/installs/${s.P.id}/usage?first_date=2026-02-15&last_date=2026-03-02`,
    );
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.install_name, s.P.name);
    assert.equal(res.body.metrics.length, 16);
    assert.deepEqual(
      res.body.metrics.slice(0, 3).map((d: Json) => [d.date, d.storage_file_bytes, d.visit_count]),
      [
        ['2026-03-02', '100', null],
        ['2026-03-01', '100', '5'],
        ['2026-02-28', '150', null],
      ],
    );
    assert.equal(res.body.metrics.at(-1).date, '2026-02-15');
    assert.equal(res.body.metrics.at(-1).storage_file_bytes, '150');
    assert.equal(res.body.metrics.at(-1).storage_database_bytes, null);
    assert.deepEqual(res.body.metrics_rollup.visit_count, { sum: '5', average: '5', latest: null });
    assert.deepEqual(res.body.metrics_rollup.storage_file_bytes, {
      sum: null,
      average: null,
      latest: { date: '2026-03-02', value: '100' },
    });
  });
});

describe('getAccountUsageMetrics', () => {
  it('pages environments (limit, offset as next_page_token), each with its daily series and rollup', async () => {
    const url = `/v1/accounts/${s.account.id}/usage`;
    const first = await s.owner.client.get(`${url}?limit=3`);
    assert.equal(first.status, 200, JSON.stringify(first.body));
    assert.equal(first.body.total_size, 4);
    assert.equal(first.body.all_environments_included, true);
    assert.equal(first.body.next_page_token, '3');
    assert.equal(first.body.environment_metrics.length, 3);
    const p = first.body.environment_metrics[0];
    assert.equal(p.environment_name, s.P.name);
    assert.equal(p.metrics.length, 30);
    assert.equal(p.metrics[0].date, '2026-03-31');
    assert.equal(p.metrics[1].visit_count, TWO_53_PLUS_1);
    assert.equal(p.metrics[0].storage_file_bytes, '100');
    assert.equal(p.metrics_rollup.visit_count.sum, '9007199254740994');
    const rest = await s.owner.client.get(`${url}?limit=3&offset=3`);
    assert.equal(rest.body.environment_metrics.length, 1);
    assert.equal(rest.body.next_page_token, null);
    assert.equal((await s.owner.client.get(`${url}?limit=1001`)).status, 400);
    assert.equal((await s.owner.client.get(`${url}?first_date=2026-03-01`)).status, 400);
  });

  it('M7 M9 account_storage_refresh_expected_time shows a pending account refresh, null once done', async () => {
    const w = await f.world();
    await t.runJobs();
    const url = `/v1/accounts/${w.account.id}/usage`;
    const before = await w.owner.client.get(url);
    assert.equal(before.body.account_storage_refresh_expected_time, null);
    assert.equal(before.body.last_account_storage_refresh_time, null);
    const refresh = await w.owner.client.post(`/v1/accounts/${w.account.id}/usage/refresh_disk_usage`);
    assert.equal(refresh.status, 200);
    const pending = await w.owner.client.get(url);
    assert.ok(pending.body.account_storage_refresh_expected_time);
    assert.ok(pending.body.environment_metrics[0].storage_refresh_expected_time);
    await t.runJobs();
    const done = await w.owner.client.get(url);
    assert.equal(done.body.account_storage_refresh_expected_time, null);
    assert.equal(done.body.last_account_storage_refresh_time, t.clock.now().toISOString());
    assert.match(done.body.environment_metrics[0].metrics[0].storage_file_bytes, /^[0-9]+$/);
  });

  it('A2 a partial member gets only its installs and all_environments_included false', async () => {
    const partial = await f.user([{ account_id: s.account.id, roles: 'partial', install_ids: [s.Q.id] }]);
    const res = await partial.client.get(`/v1/accounts/${s.account.id}/usage`);
    assert.equal(res.body.total_size, 1);
    assert.equal(res.body.all_environments_included, false);
    assert.deepEqual(
      res.body.environment_metrics.map((e: Json) => e.install_id),
      [s.Q.id],
    );
  });
});

describe('adminIngestUsage', () => {
  const usageOn = async (installId: string, date: string) =>
    (await s.owner.client.get(`/v1/installs/${installId}/usage?first_date=${date}&last_date=${date}`)).body
      .metrics[0];

  it('is idempotent; an absent metric keeps its value, null clears it', async () => {
    const rows = [{ install_id: s.S.id, date: '2026-03-10', visit_count: '12', request_origin_count: 4 }];
    const once = await ingest(rows);
    const twice = await ingest(rows);
    assert.deepEqual(once.body, { rows: 1 });
    assert.deepEqual(twice.body, once.body);
    assert.equal((await usageOn(s.S.id, '2026-03-10')).visit_count, '12');
    await ingest([{ install_id: s.S.id, date: '2026-03-10', request_origin_count: null }]);
    const day = await usageOn(s.S.id, '2026-03-10');
    assert.equal(day.visit_count, '12');
    assert.equal(day.request_origin_count, null);
  });

  it('takes int64 values as strings exactly (2^63-1)', async () => {
    await ingest([{ install_id: s.S.id, date: '2026-03-11', network_cdn_bytes: '9223372036854775807' }]);
    assert.equal((await usageOn(s.S.id, '2026-03-11')).network_cdn_bytes, '9223372036854775807');
  });

  it('refuses bad values, duplicates and unknown installs by row index, and stores nothing', async () => {
    const res = await t.admin.post('/admin/v1/usage', {
      rows: [
        { install_id: s.S.id, date: '2026-03-12', visit_count: 1 },
        { install_id: s.S.id, date: '2026-03-13', visit_count: 1.5 },
        { install_id: s.S.id, date: '2026-03-14', visit_count: -1, billable_visits: 2 ** 53 + 2 },
        { install_id: s.S.id, date: '2026-03-15', network_cdn_bytes: '9223372036854775808' },
        { install_id: s.S.id, date: '2026-03-12', visit_count: 2 },
        { install_id: '00000000-0000-4000-8000-000000000000', date: '2026-03-12' },
      ],
    });
    assert.equal(res.status, 400);
    assert.deepEqual(res.body.errors.map((e: Json) => e.field).sort(), [
      'rows[1].visit_count',
      'rows[2].billable_visits',
      'rows[2].visit_count',
      'rows[3].network_cdn_bytes',
      'rows[4].date',
      'rows[5].install_id',
    ]);
    assert.equal((await usageOn(s.S.id, '2026-03-12')).visit_count, null);
    const badDate = await t.admin.post('/admin/v1/usage', {
      rows: [{ install_id: s.S.id, date: '2026-02-30', visit_count: 1 }],
    });
    assert.equal(badDate.status, 400);
    assert.equal((await t.admin.post('/admin/v1/usage', { rows: [] })).status, 400);
  });

  it('upserts 10,000 rows in one call and refuses 10,001', async () => {
    const ids = [s.P.id, s.S.id, s.D.id, s.Q.id];
    const start = Date.UTC(2019, 0, 1);
    const rows = Array.from({ length: 10_000 }, (_, n) => ({
      install_id: ids[n % 4],
      date: new Date(start + Math.floor(n / 4) * 86_400_000).toISOString().slice(0, 10),
      visit_count: n,
      network_total_bytes: `${n}000000000000`,
    }));
    const res = await ingest(rows);
    assert.deepEqual(res.body, { rows: 10_000 });
    const more = [...rows, { install_id: s.P.id, date: '2018-01-01', visit_count: 1 }];
    assert.equal((await t.admin.post('/admin/v1/usage', { rows: more })).status, 400);
  });
});

describe('getAccountsLimits', () => {
  it("plan defaults, an operator's override, and back to the plan", async () => {
    const url = `/v1/accounts/${s.account.id}/limits`;
    const plan = await s.owner.client.get(url);
    assert.equal(plan.status, 200);
    assert.deepEqual(plan.body, { visitors: 25_000, storage: 150, bandwidth: 1_000 });
    const limits = { visitors: 50_000, storage: null, bandwidth: 0 };
    const put = await t.admin.put(`/admin/v1/accounts/${s.account.id}/limits`, limits);
    assert.equal(put.status, 200);
    assert.deepEqual((await s.owner.client.get(url)).body, limits);
    const reset = await t.admin.delete(`/admin/v1/accounts/${s.account.id}/limits`);
    assert.deepEqual(reset.body, plan.body);
    assert.deepEqual((await s.owner.client.get(url)).body, plan.body);
  });

  it('an enterprise plan has no limits until an operator sets them; unknown accounts are 404', async () => {
    const w = await f.world({ plan: 'enterprise' });
    const res = await w.owner.client.get(`/v1/accounts/${w.account.id}/limits`);
    assert.deepEqual(res.body, { visitors: null, storage: null, bandwidth: null });
    const missing = '00000000-0000-4000-8000-000000000000';
    const put = await t.admin.put(`/admin/v1/accounts/${missing}/limits`, {
      visitors: 1,
      storage: 1,
      bandwidth: 1,
    });
    assert.equal(put.status, 404);
  });
});
