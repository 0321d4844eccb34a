// test-db: postgres (the subject is the wire checker, fed bodies directly: no database: docs/decisions.md #237)
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import { checkWire, DEVIATIONS, EXTENSIONS, matchRoute, WireDriftError } from '../support/wire.js';

// The checker that test/support/harness.ts runs on every response of the API tests (issue 13: wire
// conformance to the platform's published document). These tests feed it bodies directly.

const routes = [
  { method: 'GET', url: '/v1/installs/:install_id' },
  { method: 'GET', url: '/v1/installs/:install_id/domains/:domain_id' },
  { method: 'POST', url: '/v1/installs/:install_id/domains/:domain_id/check_status' },
  { method: 'GET', url: '/v1/installs/:install_id/domains/check_status/:report_id' },
  { method: 'GET', url: '/v1/installs/:install_id/usage' },
  { method: 'GET', url: '/v1/operations/:operation_id' },
  { method: 'GET', url: '/v1/installs/:install_id/made_up' },
  { method: 'POST', url: '/v1/sites' },
  { method: 'DELETE', url: '/v1/sites/:site_id' },
  { method: 'GET', url: '/admin/v1/accounts' },
];
const id = randomUUID();

const domain = {
  id,
  name: 'example.com',
  duplicate: false,
  primary: false,
  secure_all_urls: false,
  redirects_to: [],
  txt_verified_time: null,
  txt_verification_key: '_hostplane-verify',
  txt_verification_value: 'abc',
  ownership_status: 'TXT_VERIFICATION_PENDING',
};

const check = (method: string, url: string, status: number, body: unknown) =>
  checkWire(routes, method, url, status, body === undefined ? '' : JSON.stringify(body));

function drift(fn: () => void, ...parts: (string | RegExp)[]) {
  assert.throws(fn, (error: unknown) => {
    assert.ok(error instanceof WireDriftError, String(error));
    for (const part of parts) {
      if (typeof part === 'string') assert.ok(error.message.includes(part), `${part} in ${error.message}`);
      else assert.match(error.message, part);
    }
    return true;
  });
}

describe('wire conformance checker (issue 13)', () => {
  it('a conforming body passes; a non-nullable field sent as null fails, naming operation, status and path', () => {
    check('GET', `/v1/installs/${id}/domains/${id}`, 200, domain);
    drift(
      () => check('GET', `/v1/installs/${id}/domains/${id}`, 200, { ...domain, txt_verified_domain: null }),
      'getDomain',
      ' 200 ',
      '$.txt_verified_domain must be string',
    );
  });

  it('x-nullable fields take null; enums take only their documented values', () => {
    const install = { id, name: 'abc123', account: { id }, php_version: null, environment: null, site: null };
    check('GET', `/v1/installs/${id}`, 200, install);
    drift(
      () => check('GET', `/v1/installs/${id}`, 200, { ...install, environment: 'prod' }),
      'getInstall',
      '$.environment must be equal to one of the allowed values',
    );
    drift(
      () => check('GET', `/v1/installs/${id}`, 200, { ...install, account: null }),
      '$.account must be object',
    );
  });

  it('int64 values are strings of digits where the document says so', () => {
    const usage = (visits: unknown) => ({
      install_name: 'abc',
      metrics: [{ date: '2026-01-01', visit_count: visits }],
    });
    check('GET', `/v1/installs/${id}/usage`, 200, usage('42'));
    drift(
      () => check('GET', `/v1/installs/${id}/usage`, 200, usage(42)),
      '$.metrics[0].visit_count must be string',
    );
    drift(() => check('GET', `/v1/installs/${id}/usage`, 200, usage('4.2')), '$.metrics[0].visit_count');
  });

  it('errors: documented and undocumented 4xx must have the error shape; 429 documents no body', () => {
    check('GET', `/v1/installs/${id}`, 404, { message: 'Not Found' });
    drift(() => check('GET', `/v1/installs/${id}`, 404, { error: 'Not Found' }), 'getInstall', '404');
    // 409 is not in getInstall's table: still the document's error shape.
    check('GET', `/v1/installs/${id}`, 409, { message: 'busy' });
    drift(() => check('GET', `/v1/installs/${id}`, 409, 'busy'), '409');
    check('POST', '/v1/sites', 400, { message: 'bad', errors: [] });
    drift(
      () => check('POST', '/v1/sites', 400, { message: 'bad', errors: [{ field: 'name' }] }),
      "$.errors[0] must have required property 'resource'",
    );
    check('GET', `/v1/installs/${id}`, 429, undefined);
    check('DELETE', `/v1/sites/${id}`, 204, undefined);
  });

  it('an undocumented success status is a drift', () => {
    drift(() => check('GET', `/v1/installs/${id}`, 202, {}), 'getInstall', 'answered 202');
  });

  it('routes outside the document are skipped only when EXTENSIONS lists them', () => {
    check('GET', `/v1/operations/${id}`, 200, { anything: null });
    check('GET', '/admin/v1/accounts', 200, { anything: null });
    drift(() => check('GET', `/v1/installs/${id}/made_up`, 200, {}), 'neither an operation', 'EXTENSIONS');
    assert.ok(EXTENSIONS.length > 0);
  });

  it('unknown routes answer the error shape', () => {
    check('GET', '/v1/nothing/here', 404, { message: 'Not Found' });
    drift(() => check('GET', '/v1/nothing/here', 404, { nope: true }), 'unknown route');
  });

  it('matches the most static route first (check_status/{report_id} over {domain_id}/...)', () => {
    assert.equal(
      matchRoute(routes, 'GET', `/v1/installs/${id}/domains/check_status/${id}`),
      '/v1/installs/{}/domains/check_status/{}',
    );
    assert.equal(matchRoute(routes, 'GET', `/v1/installs/${id}/domains/${id}`), '/v1/installs/{}/domains/{}');
    assert.equal(
      matchRoute(routes, 'GET', `/v1/installs/${id}?limit=1`.split('?')[0] ?? ''),
      '/v1/installs/{}',
    );
  });

  it('every deliberate deviation says why', () => {
    for (const [key, deviation] of Object.entries(DEVIATIONS)) assert.ok(deviation.reason.length > 40, key);
  });
});
