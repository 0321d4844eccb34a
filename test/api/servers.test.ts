import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import { expectFieldError } from '../support/assertions.js';
import { factories } from '../support/factories.js';
import { ADMIN_TOKEN, buildTestApp, clientFor, type Json, uniqueName } from '../support/harness.js';
import { testSshKey } from '../support/ssh-keys.js';

// Issue 30: hosting servers (/admin/v1/servers) and the agent protocol (/agent/v1), with the remote
// driver (HOSTING_DRIVER=fleet). The agent is played by hand here (its requests through the API); the
// `hostplane agent` processes are test/api/fleet-agents.test.ts's. The security table delegates the
// agent routes to this file: operationId: 'agentEnrol', operationId: 'agentHeartbeat',
// operationId: 'agentRotateCredential', operationId: 'agentFetchCalls', operationId: 'agentReportCall',
// operationId: 'agentPutArchivePart', operationId: 'agentCompleteArchive', operationId: 'agentGetArchive'.
const t = await buildTestApp({
  env: { HOSTING_DRIVER: 'fleet', FLEET_FETCH_WAIT_SECONDS: '0', FLEET_SILENT_SECONDS: '30' },
});
const f = factories(t);

const REPORT = {
  disk_total_bytes: 100e9,
  disk_free_bytes: 60e9,
  memory_total_bytes: 8e9,
  memory_free_bytes: 4e9,
  load1: 0.5,
  installs: 0,
};
const region = () => `r-${randomBytes(3).toString('hex')}`;

async function createServer(body: Record<string, unknown> = {}) {
  const res = await t.admin.post('/admin/v1/servers', {
    name: uniqueName('srv-'),
    labels: { region: 'us-central', plan: 'standard' },
    ipv4: ['203.0.113.10'],
    ipv6: ['2001:db8::10'],
    capacity: { installs: 10 },
    ...body,
  });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  return res.body as { server: Json; enrolment: { token: string; expires_at: string } };
}

/** A server with an enrolled agent (its client) that has sent one heartbeat (of `agent`'s protocol). */
async function enrolledServer(
  body: Record<string, unknown> = {},
  agentSpeaks = { protocol: 1, version: '0.1.0' },
) {
  const { server, enrolment } = await createServer(body);
  const enrolled = await t.anonymous.post('/agent/v1/enrol', { token: enrolment.token });
  assert.equal(enrolled.status, 201, JSON.stringify(enrolled.body));
  const agent = clientFor(t.app, `Bearer ${enrolled.body.credential}`);
  const session = `s-${randomBytes(6).toString('hex')}`;
  const beat = () =>
    agent.post('/agent/v1/heartbeat', {
      protocol: agentSpeaks.protocol,
      agent_version: agentSpeaks.version,
      report: REPORT,
    });
  assert.equal((await beat()).status, 200);
  const fetch = async () => {
    const res = await agent.post('/agent/v1/calls/fetch', { session, max: 20, wait_seconds: 0 });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    return res.body.calls as Json[];
  };
  return { server, agent, credential: enrolled.body.credential as string, beat, fetch, session };
}

describe('issue 30: servers in the admin API', () => {
  it('issue 30: creates, lists, gets, patches and deletes a server; the enrolment token is shown once', async () => {
    const { server, enrolment } = await createServer({ labels: { region: 'eu-west', plan: 'big' } });
    assert.match(enrolment.token, /^hpe_/);
    assert.equal(server.status, 'new');
    assert.equal(server.enrolled, false);
    assert.deepEqual(server.capacity, { installs: 10 });
    const got = await t.admin.get(`/admin/v1/servers/${server.id}`);
    assert.equal(got.status, 200);
    assert.ok(!JSON.stringify(got.body).includes(enrolment.token.slice(4)), 'the token is shown once');
    const listed = await t.admin.get('/admin/v1/servers?limit=100');
    assert.ok(listed.body.results.some((s: Json) => s.id === server.id));
    const cordoned = await t.admin.patch(`/admin/v1/servers/${server.id}`, {
      state: 'cordoned',
      labels: { region: 'eu-west', plan: 'small' },
    });
    assert.equal(cordoned.status, 200);
    assert.equal(cordoned.body.state, 'cordoned');
    assert.equal(cordoned.body.labels.plan, 'small');
    expectFieldError(await t.admin.patch(`/admin/v1/servers/${server.id}`, { state: 'gone' }), 'state');
    assert.equal((await t.admin.delete(`/admin/v1/servers/${server.id}`)).status, 204);
    assert.equal((await t.admin.get(`/admin/v1/servers/${server.id}`)).status, 404);
  });

  it('issue 30: refuses bad names, labels and addresses, and a name taken', async () => {
    const name = uniqueName('srv-');
    await createServer({ name });
    expectFieldError(
      await t.admin.post('/admin/v1/servers', { name, capacity: { installs: 1 } }),
      'name',
      'value_unavailable',
    );
    expectFieldError(
      await t.admin.post('/admin/v1/servers', { name: 'Bad Name', capacity: { installs: 1 } }),
      'name',
    );
    const badAddress = await t.admin.post('/admin/v1/servers', {
      name: uniqueName('srv-'),
      ipv4: ['2001:db8::1'],
      capacity: { installs: 1 },
    });
    assert.equal(badAddress.status, 400);
  });
});

describe('issue 30: enrolment and credentials', () => {
  it('issue 30: an enrolment token works once, and not after it expired', async () => {
    const { enrolment } = await createServer();
    assert.equal((await t.anonymous.post('/agent/v1/enrol', { token: enrolment.token })).status, 201);
    assert.equal((await t.anonymous.post('/agent/v1/enrol', { token: enrolment.token })).status, 401);
    const late = await createServer();
    t.clock.advance(3601 * 1000);
    assert.equal((await t.anonymous.post('/agent/v1/enrol', { token: late.enrolment.token })).status, 401);
  });

  it('issue 30: a server credential is 401 on /v1 and /admin/v1; Basic and admin credentials are 401 on /agent/v1', async () => {
    const { agent } = await enrolledServer();
    assert.equal((await agent.get('/v1/installs')).status, 401);
    assert.equal((await agent.get('/v1/accounts')).status, 401);
    assert.equal((await agent.get('/admin/v1/servers')).status, 401);
    assert.equal(
      (await agent.post('/admin/v1/servers', { name: 'x', capacity: { installs: 1 } })).status,
      401,
    );
    const { owner } = await f.world();
    const beat = { protocol: 1, agent_version: '0.1.0', report: REPORT };
    for (const client of [
      owner.client,
      t.admin,
      t.anonymous,
      clientFor(t.app, `Bearer hps_${'0'.repeat(8)}`),
    ]) {
      assert.equal((await client.post('/agent/v1/heartbeat', beat)).status, 401);
      assert.equal((await client.post('/agent/v1/calls/fetch', { session: 'session-1' })).status, 401);
    }
    assert.equal((await clientFor(t.app, `Bearer ${ADMIN_TOKEN}`).post('/agent/v1/credential')).status, 401);
  });

  it('issue 30: a revoked credential is 401 at its next request; re-enrolment gives a new one', async () => {
    const { server, agent, beat } = await enrolledServer();
    const revoked = await t.admin.post(`/admin/v1/servers/${server.id}/revoke`);
    assert.equal(revoked.body.enrolled, false);
    assert.equal((await beat()).status, 401);
    const again = await t.admin.post(`/admin/v1/servers/${server.id}/enrolment`);
    assert.equal(again.status, 201);
    const enrolled = await t.anonymous.post('/agent/v1/enrol', { token: again.body.token });
    assert.equal(enrolled.status, 201);
    assert.equal((await agent.post('/agent/v1/credential')).status, 401);
    const fresh = clientFor(t.app, `Bearer ${enrolled.body.credential}`);
    assert.equal(
      (await fresh.post('/agent/v1/heartbeat', { protocol: 1, agent_version: '0.1.0', report: REPORT }))
        .status,
      200,
    );
  });

  it('issue 30: rotation: the old credential works until the new one is used, then 401', async () => {
    const { agent } = await enrolledServer();
    const rotated = await agent.post('/agent/v1/credential');
    assert.equal(rotated.status, 201);
    const beat = { protocol: 1, agent_version: '0.1.0', report: REPORT };
    assert.equal((await agent.post('/agent/v1/heartbeat', beat)).status, 200, 'old one in its grace');
    const fresh = clientFor(t.app, `Bearer ${rotated.body.credential}`);
    assert.equal((await fresh.post('/agent/v1/heartbeat', beat)).status, 200);
    assert.equal((await agent.post('/agent/v1/heartbeat', beat)).status, 401, 'the new one was used');
    // Only the current credential rotates; an unused rotation's old credential ends with its grace.
    const second = await fresh.post('/agent/v1/credential');
    assert.equal(second.status, 201);
    t.clock.advance(301 * 1000);
    assert.equal((await fresh.post('/agent/v1/heartbeat', beat)).status, 401, 'grace over');
  });

  it('issue 30 (decision 243): a heartbeat shows the agent live with its version, protocol and capacity; an older protocol in the range is taken, a newer one than the control plane speaks is 409 naming both', async () => {
    const { server, agent } = await enrolledServer();
    const got = await t.admin.get(`/admin/v1/servers/${server.id}`);
    assert.equal(got.body.status, 'live');
    assert.equal(got.body.agent_version, '0.1.0');
    assert.equal(got.body.reported.disk_free_bytes, REPORT.disk_free_bytes);
    assert.equal(got.body.reported.protocol, 1, 'an agent of protocol 1 is still taken');
    const current = await agent.post('/agent/v1/heartbeat', {
      protocol: 2,
      agent_version: '0.2.0',
      report: REPORT,
    });
    assert.equal(current.status, 200, JSON.stringify(current.body));
    assert.equal((await t.admin.get(`/admin/v1/servers/${server.id}`)).body.reported.protocol, 2);
    const other = await agent.post('/agent/v1/heartbeat', {
      protocol: 3,
      agent_version: '9.0.0',
      report: REPORT,
    });
    assert.equal(other.status, 409);
    assert.match(
      other.body.message,
      /9\.0\.0.*protocol 3.*protocols 1 to 2: upgrade the control plane first/,
    );
    t.clock.advance(31 * 1000);
    assert.equal((await t.admin.get(`/admin/v1/servers/${server.id}`)).body.status, 'silent');
  });
});

describe('issue 30: calls through the agents (HOSTING_DRIVER=fleet)', () => {
  /** Creates an install in `dc` and runs its provisioning's first ask. */
  async function installIn(dc: string) {
    const w = await f.world({ preferred_data_center: dc });
    await t.runJobs();
    return w;
  }

  it('issue 30: placement by region and free capacity; cordoned and silent servers get none; calls reach only their server', async () => {
    const dc = region();
    const small = await enrolledServer({ labels: { region: dc }, capacity: { installs: 2 } });
    const big = await enrolledServer({ labels: { region: dc }, capacity: { installs: 5 } });
    const cordoned = await enrolledServer({ labels: { region: dc }, capacity: { installs: 50 } });
    await t.admin.patch(`/admin/v1/servers/${cordoned.server.id}`, { state: 'cordoned' });
    const elsewhere = await enrolledServer({ labels: { region: region() }, capacity: { installs: 50 } });
    const { install, owner } = await installIn(dc);
    const placed = await t.admin.get(`/admin/v1/servers/${big.server.id}/installs`);
    assert.deepEqual(
      placed.body.results.map((p: Json) => [p.install_id, p.generation]),
      [[install.id, 1]],
    );
    for (const other of [small, cordoned, elsewhere]) assert.deepEqual(await other.fetch(), []);
    const [call, ...more] = await big.fetch();
    assert.equal(more.length, 0);
    assert.equal(call.method, 'provision');
    assert.deepEqual(call.envelope, { server_id: big.server.id, install_id: install.id, generation: 1 });
    // Another server's agent cannot report it (403); the owner's report settles it once.
    const done = { job_id: call.job_id, status: 'done', result: { wp_version: '6.5', php_version: '8.2' } };
    assert.equal((await small.agent.post(`/agent/v1/calls/${call.id}/report`, done)).status, 403);
    assert.equal((await big.agent.post(`/agent/v1/calls/${call.id}/report`, done)).body.state, 'done');
    // A retried report (the agent died before it saw the answer) changes nothing.
    const retried = await big.agent.post(`/agent/v1/calls/${call.id}/report`, {
      ...done,
      result: { wp_version: 'other', php_version: null },
    });
    assert.equal(retried.body.state, 'done');
    t.clock.advance(3000);
    await t.runJobs();
    const shown = await owner.client.get(`/v1/installs/${install.id}`);
    assert.equal(shown.body.status, 'active', JSON.stringify(shown.body));
    assert.equal(shown.body.wp_version, '6.5');
    assert.deepEqual(await big.fetch(), []);
    // Silent servers get no new installs: the small one stays live, the big one goes silent.
    t.clock.advance(25 * 1000);
    await small.beat();
    t.clock.advance(10 * 1000);
    const next = await installIn(dc);
    const onSmall = await t.admin.get(`/admin/v1/servers/${small.server.id}/installs`);
    assert.deepEqual(
      onSmall.body.results.map((p: Json) => p.install_id),
      [next.install.id],
    );
  });

  it('issue 30 (decision 243): during a rolling upgrade an agent of protocol 1 keeps the work it knows (an install placed and provisioned there) and gets no move: a move from or to its server is refused naming its version, placement of a move skips it', async () => {
    const dc = region();
    const old = await enrolledServer(
      { labels: { region: dc }, capacity: { installs: 50 } },
      { protocol: 1, version: '0.0.9' },
    );
    const current = await enrolledServer(
      { labels: { region: dc }, capacity: { installs: 2 } },
      { protocol: 2, version: '0.2.0' },
    );
    /** An install placed on `on` (the other cordoned meanwhile), provisioned by its agent. */
    async function provisionedOn(on: typeof old, other: typeof old) {
      await t.admin.patch(`/admin/v1/servers/${other.server.id}`, { state: 'cordoned' });
      const { install, owner } = await installIn(dc);
      await t.admin.patch(`/admin/v1/servers/${other.server.id}`, { state: 'active' });
      const [call] = await on.fetch();
      assert.equal(call?.method, 'provision', 'the agent gets the work it knows');
      const done = {
        job_id: call?.job_id,
        status: 'done',
        result: { wp_version: '6.5', php_version: '8.2' },
      };
      assert.equal((await on.agent.post(`/agent/v1/calls/${call?.id}/report`, done)).body.state, 'done');
      t.clock.advance(3000);
      await t.runJobs();
      assert.equal((await owner.client.get(`/v1/installs/${install.id}`)).body.status, 'active');
      return install;
    }
    const onOld = await provisionedOn(old, current);
    const from = await t.admin.post(`/admin/v1/installs/${onOld.id}/move`, { server_id: current.server.id });
    assert.equal(from.status, 409, JSON.stringify(from.body));
    assert.match(
      from.body.message,
      /agent 0\.0\.9 \(protocol 1\) cannot take part in a move .*protocol 2.*upgrade/,
    );
    const onCurrent = await provisionedOn(current, old);
    const to = await t.admin.post(`/admin/v1/installs/${onCurrent.id}/move`, { server_id: old.server.id });
    expectFieldError(to, 'server_id');
    assert.match(JSON.stringify(to.body), /agent 0\.0\.9 \(protocol 1\) cannot take part in a move/);
    // Placement of a move (no server named) passes over it: no other server takes moves.
    const anywhere = await t.admin.post(`/admin/v1/installs/${onCurrent.id}/move`, {});
    assert.equal(anywhere.status, 409, JSON.stringify(anywhere.body));
    assert.match(anywhere.body.message, /with an agent that takes moves/);
    // Upgraded (its next heartbeat speaks protocol 2), it takes the move.
    assert.equal(
      (await old.agent.post('/agent/v1/heartbeat', { protocol: 2, agent_version: '0.2.0', report: REPORT }))
        .status,
      200,
    );
    const dry = await t.admin.post(`/admin/v1/installs/${onCurrent.id}/move?dry_run=true`, {});
    assert.equal(dry.status, 200, JSON.stringify(dry.body));
    assert.equal(dry.body.target_server_id, old.server.id);
  });

  it("issue 30 (decision #212): a heartbeat naming an install of its own whose server block is gone starts the install's apply_routing (joined while queued); one naming another server's install starts nothing", async () => {
    const dc = region();
    const own = await enrolledServer({ labels: { region: dc } });
    const other = await enrolledServer({ labels: { region: region() } });
    const { install, owner } = await installIn(dc);
    const routings = async () => {
      const ops = await owner.client.get(`/v1/installs/${install.id}/operations?limit=100`);
      assert.equal(ops.status, 200, JSON.stringify(ops.body));
      return (ops.body.results as Json[]).filter((o) => o.type === 'apply_routing').map((o) => o.status);
    };
    // The agent plays its part: provisioning and whatever routing it started, each reported done.
    for (let round = 0; round < 4; round++) {
      for (const call of await own.fetch()) {
        const result =
          call.method === 'provision' ? { wp_version: '6.5', php_version: '8.2' } : { names: [] as string[] };
        const res = await own.agent.post(`/agent/v1/calls/${call.id}/report`, {
          job_id: call.job_id,
          status: 'done',
          result,
        });
        assert.equal(res.status, 200, JSON.stringify(res.body));
      }
      t.clock.advance(3000);
      await t.runJobs();
    }
    assert.equal((await owner.client.get(`/v1/installs/${install.id}`)).body.status, 'active');
    const before = await routings();
    assert.ok(
      before.every((s) => s === 'completed'),
      JSON.stringify(before),
    );
    const missing = (routing_missing: string[]) => ({
      protocol: 1,
      agent_version: '0.1.0',
      report: { ...REPORT, routing_missing },
    });
    assert.equal((await other.agent.post('/agent/v1/heartbeat', missing([install.id]))).status, 200);
    assert.deepEqual(await routings(), before, "another server's report starts nothing");
    assert.equal((await own.agent.post('/agent/v1/heartbeat', missing([install.id]))).status, 200);
    assert.equal((await own.agent.post('/agent/v1/heartbeat', missing([install.id]))).status, 200);
    const after = await routings();
    assert.equal(after.length, before.length + 1, JSON.stringify(after));
    t.clock.advance(3000);
    await t.runJobs();
    assert.deepEqual(
      (await own.fetch()).map((c) => [c.method, c.envelope.install_id]),
      [['applyRouting', install.id]],
    );
    const bad = await own.agent.post('/agent/v1/heartbeat', missing(['not-a-uuid']));
    assert.equal(bad.status, 400, JSON.stringify(bad.body));
  });

  it("issue 30 (decision #195): a backup's archive: only the server running that backup call uploads it, in parts (409 past its end, or completed at another length); a server reads only the archive its own copy or restore call names", async () => {
    const dc = region();
    const a = await enrolledServer({ labels: { region: dc } });
    const b = await enrolledServer({ labels: { region: region() } });
    const { install, owner } = await installIn(dc);
    const [provision] = await a.fetch();
    const put = (credential: string, callId: string, offset: number, body: Buffer) =>
      t.app.inject({
        method: 'PUT',
        url: `/agent/v1/calls/${callId}/archive?offset=${offset}`,
        headers: { authorization: `Bearer ${credential}`, 'content-type': 'application/octet-stream' },
        payload: body,
      });
    // Not a backup call: nothing to upload.
    assert.equal((await put(a.credential, provision.id, 0, Buffer.from('x'))).statusCode, 409);
    await a.agent.post(`/agent/v1/calls/${provision.id}/report`, {
      job_id: provision.job_id,
      status: 'done',
      result: { wp_version: '6.5', php_version: '8.2' },
    });
    t.clock.advance(3000);
    await t.runJobs();
    const asked = await owner.client.post(`/v1/installs/${install.id}/backups`, {
      description: 'shipped',
      notification_emails: [],
    });
    assert.equal(asked.status, 202, JSON.stringify(asked.body));
    await t.runJobs();
    const [backup] = await a.fetch();
    assert.equal(backup.method, 'backup');
    const body = Buffer.from('the archive bytes');
    assert.equal((await put(b.credential, backup.id, 0, body)).statusCode, 403, "another server's call");
    const anonymous = await t.app.inject({
      method: 'PUT',
      url: `/agent/v1/calls/${backup.id}/archive?offset=0`,
      headers: { 'content-type': 'application/octet-stream' },
      payload: body,
    });
    assert.equal(anonymous.statusCode, 401);
    const first = await put(a.credential, backup.id, 0, body.subarray(0, 5));
    assert.equal(first.statusCode, 200, first.body);
    assert.deepEqual(first.json(), { bytes: 5 });
    assert.equal((await put(a.credential, backup.id, 9, body.subarray(9))).statusCode, 409, 'past the end');
    // A part sent again (its answer lost) rewrites from its offset.
    assert.deepEqual((await put(a.credential, backup.id, 0, body.subarray(0, 5))).json(), { bytes: 5 });
    assert.deepEqual((await put(a.credential, backup.id, 5, body.subarray(5))).json(), {
      bytes: body.length,
    });
    const sha256 = createHash('sha256').update(body).digest('hex');
    const short = await a.agent.post(`/agent/v1/calls/${backup.id}/archive/complete`, { bytes: 3, sha256 });
    assert.equal(short.status, 409, JSON.stringify(short.body));
    const complete = await a.agent.post(`/agent/v1/calls/${backup.id}/archive/complete`, {
      bytes: body.length,
      sha256,
    });
    assert.equal(complete.status, 200, JSON.stringify(complete.body));
    assert.deepEqual(complete.body, { id: backup.id, bytes: body.length, sha256 });
    // A backup call feeds on no archive; another server's call is 403 whatever it names.
    assert.equal((await a.agent.get(`/agent/v1/calls/${backup.id}/archive`)).status, 404);
    assert.equal((await b.agent.get(`/agent/v1/calls/${backup.id}/archive`)).status, 403);
    assert.equal((await t.anonymous.get(`/agent/v1/calls/${backup.id}/archive`)).status, 401);
  });

  it('issue 30: a silent server: its calls wait with the reason, then fail with it; ask-again is rescheduled', async () => {
    const dc = region();
    const server = await enrolledServer({ labels: { region: dc } });
    const { install, owner } = await installIn(dc);
    const [call] = await server.fetch();
    // The agent's driver says "ask again": the call comes back at that time, not before.
    const checkAt = new Date(t.clock.now().getTime() + 1000).toISOString();
    const pending = await server.agent.post(`/agent/v1/calls/${call.id}/report`, {
      job_id: call.job_id,
      status: 'pending',
      check_at: checkAt,
    });
    assert.equal(pending.body.state, 'queued', JSON.stringify(pending.body));
    let again: Json[] = [];
    const deadline = Date.now() + 10_000;
    while (again.length === 0 && Date.now() < deadline) again = await server.fetch();
    assert.equal(again[0]?.id, call.id);
    assert.notEqual(again[0]?.job_id, call.job_id);
    // The agent goes silent with the call in hand: the operation waits, then fails with the reason.
    t.clock.advance(31 * 1000);
    await t.runJobs();
    const ops = await owner.client.get(`/v1/installs/${install.id}/operations`);
    const op = ops.body.results.find((o: Json) => o.type === 'provision_install') ?? ops.body.results[0];
    assert.notEqual(op.status, 'failed', JSON.stringify(op));
    t.clock.advance(901 * 1000);
    await t.runJobs();
    const failed = await owner.client.get(`/v1/operations/${op.id}`);
    assert.equal(failed.body.status, 'failed', JSON.stringify(failed.body));
    assert.match(JSON.stringify(failed.body), /silent/);
  });

  it('issue 30: a new agent session gets back the calls the dead one held; delete is refused while installs are placed', async () => {
    const dc = region();
    const server = await enrolledServer({ labels: { region: dc } });
    await installIn(dc);
    const [held] = await server.fetch();
    assert.ok(held);
    assert.deepEqual(await server.fetch(), [], 'active: not handed out twice');
    const restarted = await server.agent.post('/agent/v1/calls/fetch', {
      session: 'restarted-1',
      max: 5,
      wait_seconds: 0,
    });
    assert.deepEqual(
      restarted.body.calls.map((c: Json) => c.id),
      [held.id],
    );
    assert.equal((await t.admin.delete(`/admin/v1/servers/${server.server.id}`)).status, 409);
  });
});

// Issue 31 (decision 200): the agent's SSH routes, delegated here by the security table:
// operationId: 'agentSshDecide', operationId: 'agentSshLogins'.
describe('issue 31: the agent SSH routes', () => {
  it("issue 31: a server's agent is answered about installs placed on it only (403 for another server's install), 401 without its own credential; the logins it reports are audit events naming the server", async () => {
    const dc = region();
    const x = await enrolledServer({ labels: { region: dc } });
    const y = await enrolledServer({ labels: { region: region() } });
    const w = await f.world({ preferred_data_center: dc });
    await t.runJobs();
    // The agent provisions it (by hand here): SSH opens active installs only.
    const [call] = await x.fetch();
    assert.ok(call);
    const done = { job_id: call.job_id, status: 'done', result: { wp_version: '6.5', php_version: '8.2' } };
    assert.equal((await x.agent.post(`/agent/v1/calls/${call.id}/report`, done)).body.state, 'done');
    t.clock.advance(3000);
    await t.runJobs();
    assert.equal((await w.owner.client.get(`/v1/installs/${w.install.id}`)).body.status, 'active');
    const key = testSshKey();
    const registered = await w.owner.client.post('/v1/ssh_keys', { public_key: key.line });
    assert.equal(registered.status, 201, JSON.stringify(registered.body));
    const fingerprintOf = (blob: Buffer) =>
      `SHA256:${createHash('sha256').update(blob).digest('base64').replace(/=+$/, '')}`;
    assert.equal(registered.body.fingerprint, fingerprintOf(key.blob));
    const ask = {
      login: w.install.name,
      fingerprint: fingerprintOf(key.blob),
      public_key: `${key.type} ${key.blob.toString('base64')}`,
    };

    const allowed = await x.agent.post('/agent/v1/ssh/decide', ask);
    assert.equal(allowed.status, 200, JSON.stringify(allowed.body));
    assert.equal(allowed.body.allowed, true);
    assert.equal(allowed.body.install_id, w.install.id);
    assert.equal(allowed.body.full_access, true);
    const unknownKey = testSshKey();
    const refused = await x.agent.post('/agent/v1/ssh/decide', {
      ...ask,
      fingerprint: fingerprintOf(unknownKey.blob),
      public_key: `${unknownKey.type} ${unknownKey.blob.toString('base64')}`,
    });
    assert.equal(refused.status, 200, JSON.stringify(refused.body));
    assert.equal(refused.body.allowed, false, 'a key nobody registered opens nothing');
    assert.equal((await y.agent.post('/agent/v1/ssh/decide', ask)).status, 403, "another server's install");
    assert.equal((await t.anonymous.post('/agent/v1/ssh/decide', ask)).status, 401);
    assert.equal((await w.owner.client.post('/agent/v1/ssh/decide', ask)).status, 401, 'a user credential');
    assert.equal(
      (await x.agent.post('/agent/v1/ssh/decide', { ...ask, login: 'Bad Name!' })).status,
      400,
      'a login that is no install name',
    );

    const login = {
      result: 'accepted',
      login: w.install.name,
      address: '203.0.113.5',
      fingerprint: registered.body.fingerprint,
    };
    assert.equal((await t.anonymous.post('/agent/v1/ssh/logins', { logins: [login] })).status, 401);
    const recorded = await x.agent.post('/agent/v1/ssh/logins', { logins: [login] });
    assert.equal(recorded.status, 200, JSON.stringify(recorded.body));
    assert.equal(recorded.body.recorded, 1);
    const events = await w.owner.client.get(
      `/v1/accounts/${w.account.id}/audit_events?action=ssh.login&limit=10`,
    );
    assert.equal(events.status, 200);
    const event = (events.body.results as Json[]).find((e) => e.resource.id === w.install.id);
    assert.ok(event, JSON.stringify(events.body).slice(0, 600));
    assert.equal(event.actor.ip, '203.0.113.5');
    assert.equal(event.after.fingerprint, registered.body.fingerprint);
    assert.match(JSON.stringify(event), new RegExp(x.server.id as string), 'the event names server x');
  });
});
