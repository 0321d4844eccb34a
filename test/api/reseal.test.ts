import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { eq } from 'drizzle-orm';
import { certificates, simulatedCa, simulatedTasks } from '../../src/db/schema.js';
import { resealSecrets } from '../../src/reseal.js';
import { createSecretBox } from '../../src/secrets.js';
import { startDnsServer } from '../support/dns-server.js';
import { addDomain, uniqueDomain, verifyDomain } from '../support/domains.js';
import { factories } from '../support/factories.js';
import {
  ADMIN_TOKEN,
  buildTestApp,
  clientFor,
  SECRET_KEY,
  type StartedApp,
  startApp,
} from '../support/harness.js';
import { operationOf } from '../support/jobs.js';

// Rotation of HOSTPLANE_SECRET_KEY (docs/operations.md): `hostplane reseal` runs resealSecrets.
const OLD = SECRET_KEY;
const NEW = 'rotated-secret-key-0123456789abcdefghijkl';
const PREVIOUS_ADMIN_TOKEN = 'previous-admin-token-0123456789';
const dns = await startDnsServer();
const t = await buildTestApp({ env: { DNS_SERVERS: dns.address } });
const f = factories(t);
// The same database under the new key, first with the old one still accepted (the rotation's
// middle step), then with the new key alone (after the reseal).
const both: StartedApp = await startApp(t.database, {
  env: {
    DNS_SERVERS: dns.address,
    HOSTPLANE_SECRET_KEY: NEW,
    HOSTPLANE_SECRET_KEY_OLD: OLD,
    HOSTPLANE_ADMIN_TOKEN_PREVIOUS: PREVIOUS_ADMIN_TOKEN,
  },
});
const rotated: StartedApp = await startApp(t.database, {
  env: { DNS_SERVERS: dns.address, HOSTPLANE_SECRET_KEY: NEW },
});
after(async () => {
  await both.close();
  await rotated.close();
});

const HOLDER = {
  email_address: 'jane@example.test',
  given_name: 'Jane',
  family_name: 'Doe',
  region_code: 'US',
  state: 'Texas',
  city: 'Austin',
  phone: '800-123-4567',
};

/** Orders a simulated certificate through `app` (its key sealed, the CA's key opened) and checks it completes. */
async function orderCertificate(app: StartedApp) {
  const w = await f.world();
  await app.runJobs();
  const domain = await verifyDomain(
    dns,
    w.owner.client,
    w.install.id,
    await addDomain(w.owner.client, w.install.id, uniqueDomain('rk')),
  );
  const owner = clientFor(app.app, w.owner.authorization);
  const res = await owner.post(`/v1/installs/${w.install.id}/domains/${domain.id}/ssl_certificate`, HOLDER);
  assert.equal(res.status, 202, JSON.stringify(res.body));
  await app.runJobs();
  const op = await operationOf(owner, res);
  assert.equal(op.status, 'completed', JSON.stringify(op));
}

/** Every sealed value in the database with what it is bound to. */
async function sealedValues() {
  const db = t.database.db;
  const certs = await db.select().from(certificates);
  const cas = await db.select().from(simulatedCa);
  const tasks = (await db.select().from(simulatedTasks)).filter(
    (task) => task.operation === 'issue_certificate',
  );
  return [
    ...certs.map((c) => ({ sealed: c.private_key_sealed, context: c.id })),
    ...cas.map((c) => ({ sealed: c.key_sealed, context: 'simulated-ca' })),
    ...tasks.map((task) => ({
      sealed: (task.result as { key_sealed: string }).key_sealed,
      context: `simulated-task:${task.key}`,
    })),
  ];
}

const opens = (key: string, v: { sealed: string; context: string }) => {
  try {
    createSecretBox(key).open(v.sealed, v.context);
    return true;
  } catch {
    return false;
  }
};

describe('hostplane reseal (HOSTPLANE_SECRET_KEY rotation)', () => {
  it('moves every sealed value to the new key in one run; a rerun changes nothing; the new key alone then serves', async () => {
    await orderCertificate(t); // under the old key: CA key, task result, certificate key
    await orderCertificate(both); // new key deployed, old one still accepted: reads old, seals new
    const before = await sealedValues();
    const underOld = before.filter((v) => opens(OLD, v)).length;
    const underNew = before.filter((v) => opens(NEW, v)).length;
    assert.ok(underOld >= 3 && underNew >= 2, `old ${underOld}, new ${underNew}`);
    assert.equal(underOld + underNew, before.length);

    assert.deepEqual(await resealSecrets(t.database, OLD, NEW), { resealed: underOld, current: underNew });
    const afterwards = await sealedValues();
    assert.equal(afterwards.length, before.length);
    for (const v of afterwards) {
      assert.ok(opens(NEW, v), `${v.context} opens under the new key`);
      assert.ok(!opens(OLD, v), `${v.context} no longer opens under the old key`);
    }
    // Idempotent: a rerun finds everything current and rewrites nothing.
    assert.deepEqual(await resealSecrets(t.database, OLD, NEW), { resealed: 0, current: before.length });
    assert.deepEqual(await sealedValues(), afterwards);

    // The CA's key (and every other) opens under the new key alone.
    await orderCertificate(rotated);
  });

  it('a value that opens under neither key aborts the run: nothing changes', async () => {
    await orderCertificate(rotated);
    const [first, second] = await t.database.db.select().from(certificates).limit(2);
    assert.ok(first && second);
    const back = createSecretBox(OLD).seal(Buffer.from('old key material'), first.id);
    const foreign = createSecretBox('some-other-key-0123456789abcdefghijklmn').seal(
      Buffer.from('x'),
      second.id,
    );
    await t.database.db
      .update(certificates)
      .set({ private_key_sealed: back })
      .where(eq(certificates.id, first.id));
    await t.database.db
      .update(certificates)
      .set({ private_key_sealed: foreign })
      .where(eq(certificates.id, second.id));
    const before = await sealedValues();
    await assert.rejects(resealSecrets(t.database, OLD, NEW), /opens under neither the old nor the new key/);
    assert.deepEqual(await sealedValues(), before);
    await assert.rejects(resealSecrets(t.database, NEW, NEW), /are the same/);
  });
});

describe('admin token rotation (HOSTPLANE_ADMIN_TOKEN_PREVIOUS)', () => {
  it('G2 the previous token works beside the current one while it is set, and is a 401 once removed', async () => {
    const clock = (app: StartedApp, token: string) =>
      clientFor(app.app, `Bearer ${token}`).get('/admin/v1/clock');
    assert.equal((await clock(both, ADMIN_TOKEN)).status, 200);
    assert.equal((await clock(both, PREVIOUS_ADMIN_TOKEN)).status, 200);
    assert.equal((await clock(both, `${PREVIOUS_ADMIN_TOKEN}x`)).status, 401);
    assert.equal((await clock(rotated, ADMIN_TOKEN)).status, 200);
    assert.equal((await clock(rotated, PREVIOUS_ADMIN_TOKEN)).status, 401);
  });
});
