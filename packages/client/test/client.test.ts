// The typed client against a real Hostplane (bin/hostplane.js serve on PGlite in a temp DATA_DIR), as
// its users call it. Run by `npm test` (scripts/test.sh, the packages phase).
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { fetchDocument, generateSchema, SCHEMA_FILE } from '../scripts/generate.js';
import { ATTEMPTS_PER_STEP, type Hostplane, startHostplane, TEST_SERVER_ENV } from '../scripts/serve.js';
import {
  createHostplaneClient,
  type HostplaneClient,
  NotFoundError,
  type Operation,
  OperationFailedError,
  UnauthenticatedError,
  ValidationError,
} from '../src/index.js';

let server: Hostplane;
let hp: HostplaneClient;

before(async () => {
  server = await startHostplane(TEST_SERVER_ENV);
  hp = createHostplaneClient({ baseUrl: server.url, ...server.demo });
});
after(() => server?.stop());

async function admin(method: string, path: string, body: unknown) {
  const res = await fetch(`${server.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${server.adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  assert.ok(res.ok, `${method} ${path}: ${res.status} ${await res.clone().text()}`);
}

/** A new site with an active install (provisioning waited for through the install's operations). */
async function activeInstall(name: string) {
  const accountId = server.demo.accountId;
  const site = (await hp.post('/v1/sites', { body: { account_id: accountId, name: `Site ${name}` } })).data;
  const install = (
    await hp.post('/v1/installs', {
      body: { account_id: accountId, site_id: site.id, name, environment: 'production' },
    })
  ).data;
  const ops = await hp.get('/v1/installs/{install_id}/operations', {
    params: { path: { install_id: install.id } },
  });
  const provision = ops.results.find((op) => op.type === 'provision_install');
  assert.ok(provision, 'the install has a provisioning operation');
  await hp.waitForOperation(provision.id, { intervalMs: 50 });
  return { site, install };
}

describe('issue 23: the typed client (packages/client)', () => {
  it('the committed generated schema matches the OpenAPI document the server serves (regenerate: npm run generate:client)', async () => {
    const fresh = await generateSchema(await fetchDocument(server.url));
    const committed = fs.readFileSync(SCHEMA_FILE, 'utf8');
    assert.ok(committed === fresh, `${SCHEMA_FILE} is stale: run npm run generate:client and commit it`);
  });

  it('creates a site and reads it back, typed', async () => {
    const created = await hp.post('/v1/sites', {
      body: { account_id: server.demo.accountId, name: 'Client Site', tags: ['client'] },
    });
    assert.equal(created.status, 201);
    assert.equal(created.data.name, 'Client Site');
    const read = await hp.get('/v1/sites/{site_id}', { params: { path: { site_id: created.data.id } } });
    assert.equal(read.id, created.data.id);
    assert.equal(read.account.id, server.demo.accountId);
  });

  it('lists with pagination: one page by limit/offset, and every page with listAll', async () => {
    const tag = `page-${randomUUID().slice(0, 8)}`;
    for (const n of [1, 2, 3]) {
      await hp.post('/v1/sites', { body: { account_id: server.demo.accountId, name: `${tag} ${n}` } });
    }
    const first = await hp.get('/v1/sites', {
      params: { query: { account_id: server.demo.accountId, limit: 2, offset: 0 } },
    });
    assert.equal(first.results.length, 2);
    assert.ok(first.count >= 4, 'the demo site and the three new ones');
    assert.ok(first.next?.includes('offset=2'));
    assert.equal(first.previous, null);
    const all = await hp.listAll(
      (page) => hp.get('/v1/sites', { params: { query: { account_id: server.demo.accountId, ...page } } }),
      2,
    );
    assert.equal(all.length, first.count);
    assert.equal(new Set(all.map((s) => s.id)).size, all.length, 'no site twice across pages');
    assert.equal(all.filter((s) => s.name.startsWith(tag)).length, 3);
  });

  it('error answers are typed errors: 404 NotFoundError, 401 UnauthenticatedError, 400 ValidationError with field errors', async () => {
    await assert.rejects(
      hp.get('/v1/sites/{site_id}', { params: { path: { site_id: randomUUID() } } }),
      (error) => error instanceof NotFoundError && error.status === 404 && error.kind === 'not_found',
    );
    const wrong = createHostplaneClient({
      baseUrl: server.url,
      username: server.demo.username,
      password: 'nope',
    });
    await assert.rejects(
      wrong.get('/v1/accounts'),
      (error) => error instanceof UnauthenticatedError && error.status === 401,
    );
    await assert.rejects(
      hp.post('/v1/sites', {
        // biome-ignore lint/suspicious/noExplicitAny: a body the types forbid, as a script might send
        body: { account_id: server.demo.accountId } as any,
      }),
      (error) =>
        error instanceof ValidationError &&
        error.status === 400 &&
        error.fieldErrors.some((f) => f.field === 'name' && f.resource === 'site'),
    );
  });

  it('waits for a backup to complete, reporting progress, and a failed backup rejects with OperationFailedError', async () => {
    const { install } = await activeInstall(`cl${randomUUID().slice(0, 8)}`);
    const started = await hp.post('/v1/installs/{install_id}/backups', {
      params: { path: { install_id: install.id } },
      body: { description: 'client test', notification_emails: [] },
    });
    assert.equal(started.status, 202);
    assert.ok(started.location?.includes('/v1/operations/'));
    const seen: Operation['status'][] = [];
    const done = await hp.waitForOperation(started.location ?? '', {
      intervalMs: 50,
      onProgress: (op) => seen.push(op.status),
    });
    assert.equal(done.status, 'completed');
    assert.equal(seen.at(-1), 'completed');
    const backup = await hp.get('/v1/installs/{install_id}/backups/{backup_id}', {
      params: { path: { install_id: install.id, backup_id: started.data.id } },
    });
    assert.equal(backup.status, 'completed');

    await admin('POST', '/admin/v1/faults', { operation: 'backup', count: ATTEMPTS_PER_STEP, mode: 'fail' });
    const failing = await hp.post('/v1/installs/{install_id}/backups', {
      params: { path: { install_id: install.id } },
      body: { description: 'will fail', notification_emails: [] },
    });
    await assert.rejects(
      hp.waitForOperation(failing.location ?? '', { intervalMs: 50 }),
      (error) => error instanceof OperationFailedError && error.operation.type === 'create_backup',
    );
  });
});
