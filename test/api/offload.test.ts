import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { factories } from '../support/factories.js';
import { buildTestApp, type Json } from '../support/harness.js';

const t = await buildTestApp();
const f = factories(t);

const filesUrl = (installId: string) => `/v1/installs/${installId}/offload_settings/files`;
const validationUrl = (installId: string) =>
  `/v1/installs/${installId}/offload_settings/largefs_validation_file`;
const settings = (extra: Json = {}) => ({
  largefs_settings: { cloud: 's3', bucket: 'acme-media', bucket_region: 'us-east-1', ...extra },
});

function fieldError(res: Json, field: string, code?: string) {
  assert.equal(res.status, 400, JSON.stringify(res.body));
  const error = res.body.errors.find((e: Json) => e.field === field);
  assert.ok(error, `no error on ${field}: ${JSON.stringify(res.body)}`);
  assert.equal(error.resource, 'offload_settings');
  if (code) assert.equal(error.code, code);
  return error;
}

describe('getOffloadSettings', () => {
  it('getOffloadSettings answers {} for an install that was never configured', async () => {
    const w = await f.world();
    const res = await w.owner.client.get(filesUrl(w.install.id));
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, {});
  });
});

describe('updateOffloadSettings', () => {
  it('updateOffloadSettings stores the whole configuration: 202 with it, defaults filled in, GET shows it', async () => {
    const w = await f.world();
    const body = settings({
      path_settings: [
        {
          path: 'wp-content/uploads/',
          excluded_paths: ['wp-content/uploads/private/'],
          redirect_type: 'break',
        },
        { path: 'wp-content/media/' },
      ],
    });
    const res = await w.owner.client.post(filesUrl(w.install.id), body);
    assert.equal(res.status, 202, JSON.stringify(res.body));
    const expected = {
      largefs_settings: {
        cloud: 's3',
        bucket: 'acme-media',
        bucket_region: 'us-east-1',
        path_settings: [
          {
            path: 'wp-content/uploads/',
            excluded_paths: ['wp-content/uploads/private/'],
            redirect_type: 'break',
          },
          { path: 'wp-content/media/', excluded_paths: [], redirect_type: 'permanent' },
        ],
      },
    };
    assert.deepEqual(res.body, expected);
    assert.deepEqual((await w.owner.client.get(filesUrl(w.install.id))).body, expected);
    // POST replaces: path settings not sent are gone.
    const again = await w.owner.client.post(filesUrl(w.install.id), settings({ bucket: 'acme-other' }));
    assert.equal(again.status, 202);
    assert.deepEqual(again.body.largefs_settings.path_settings, []);
    assert.equal(again.body.largefs_settings.bucket, 'acme-other');
  });

  it('updateOffloadSettings validates every field: cloud enum, bucket and region names, paths, redirect_type', async () => {
    const w = await f.world();
    const post = (body: Json) => w.owner.client.post(filesUrl(w.install.id), body);
    fieldError(await post({}), 'largefs_settings', 'required');
    fieldError(await post(settings({ cloud: 'gcs' })), 'largefs_settings.cloud');
    fieldError(await post(settings({ bucket: 'Bad_Bucket' })), 'largefs_settings.bucket', 'pattern');
    fieldError(await post(settings({ bucket: 'ab' })), 'largefs_settings.bucket');
    fieldError(await post(settings({ bucket_region: 'mars' })), 'largefs_settings.bucket_region');
    fieldError(
      await post({ largefs_settings: { cloud: 's3', bucket: 'acme-media' } }),
      'largefs_settings.bucket_region',
      'required',
    );
    fieldError(
      await post(settings({ path_settings: [{ path: '/etc/' }] })),
      'largefs_settings.path_settings[0].path',
    );
    fieldError(
      await post(settings({ path_settings: [{ path: 'wp-content/../../etc' }] })),
      'largefs_settings.path_settings[0].path',
    );
    fieldError(
      await post(settings({ path_settings: [{ path: 'a/', redirect_type: 'temporary' }] })),
      'largefs_settings.path_settings[0].redirect_type',
    );
    const many = Array.from({ length: 21 }, (_, i) => ({ path: `p${i}/` }));
    fieldError(await post(settings({ path_settings: many })), 'largefs_settings.path_settings');
    fieldError(
      await post(
        settings({ path_settings: [{ path: 'wp-content/uploads/' }, { path: 'wp-content/uploads' }] }),
      ),
      'largefs_settings.path_settings[1].path',
      'duplicate_path',
    );
    assert.deepEqual((await w.owner.client.get(filesUrl(w.install.id))).body, {}, 'nothing was stored');
  });
});

describe('patchOffloadSettings', () => {
  it('patchOffloadSettings replaces only the fields given and keeps the rest', async () => {
    const w = await f.world();
    await w.owner.client.post(
      filesUrl(w.install.id),
      settings({ path_settings: [{ path: 'wp-content/uploads/' }] }),
    );
    const res = await w.owner.client.patch(filesUrl(w.install.id), {
      largefs_settings: { bucket_region: 'eu-west-2' },
    });
    assert.equal(res.status, 202, JSON.stringify(res.body));
    assert.equal(res.body.largefs_settings.bucket_region, 'eu-west-2');
    assert.equal(res.body.largefs_settings.bucket, 'acme-media');
    assert.deepEqual(res.body.largefs_settings.path_settings, [
      { path: 'wp-content/uploads/', excluded_paths: [], redirect_type: 'permanent' },
    ]);
    assert.deepEqual((await w.owner.client.get(filesUrl(w.install.id))).body, res.body);
  });

  it('patchOffloadSettings on an unconfigured install needs a whole configuration: 400 not_configured naming the missing fields', async () => {
    const w = await f.world();
    const res = await w.owner.client.patch(filesUrl(w.install.id), {
      largefs_settings: { bucket: 'acme-media' },
    });
    const error = fieldError(res, 'largefs_settings', 'not_configured');
    assert.match(error.message, /cloud, bucket_region/);
    const whole = await w.owner.client.patch(filesUrl(w.install.id), settings());
    assert.equal(whole.status, 202);
    fieldError(await w.owner.client.patch(filesUrl(w.install.id), {}), 'largefs_settings', 'required');
  });
});

describe('getLargeFSValidationFile', () => {
  it('getLargeFSValidationFile answers a name and content stable per install, different between installs', async () => {
    const w = await f.world();
    const other = await f.world();
    const first = await w.owner.client.get(validationUrl(w.install.id));
    assert.equal(first.status, 200);
    assert.match(first.body.name, /^[0-9a-f]{8}\.largefs$/);
    assert.match(first.body.content, /^[0-9a-f]{16}$/);
    assert.deepEqual((await w.owner.client.get(validationUrl(w.install.id))).body, first.body);
    const second = await other.owner.client.get(validationUrl(other.install.id));
    assert.notEqual(second.body.name, first.body.name);
    assert.notEqual(second.body.content, first.body.content);
  });
});

describe('authorization of the offload routes (G2, G4, A2)', () => {
  it('401 without credentials, 404 for a foreign account, an unknown install and a partial user outside its installs', async () => {
    const w = await f.world();
    const foreign = await f.world();
    const partial = await f.user([{ account_id: w.account.id, roles: 'partial', install_ids: [] }]);
    const calls: [string, string, Json?][] = [
      ['GET', filesUrl(w.install.id)],
      ['POST', filesUrl(w.install.id), settings()],
      ['PATCH', filesUrl(w.install.id), settings()],
      ['GET', validationUrl(w.install.id)],
    ];
    for (const [method, url, body] of calls) {
      const m = method as 'GET' | 'POST' | 'PATCH';
      assert.equal((await t.anonymous.request(m, url, body)).status, 401, `${method} ${url}`);
      assert.equal((await foreign.owner.client.request(m, url, body)).status, 404, `${method} ${url}`);
      assert.equal((await partial.client.request(m, url, body)).status, 404, `${method} ${url}`);
      const unknown = url.replace(w.install.id, '00000000-0000-4000-8000-000000000000');
      assert.equal((await w.owner.client.request(m, unknown, body)).status, 404, `${method} ${unknown}`);
    }
  });
});
