// test-db: postgres
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { sql } from 'drizzle-orm';
import { loadConfig } from '../../src/config.js';
import { queryRows } from '../../src/db/client.js';
import { listenForJobs } from '../../src/jobs/queue.listen.js';
import { openConfiguredDatabase } from '../../src/main.js';
import { createFleetCalls } from '../../src/modules/servers/servers.calls.service.js';
import { createSecretBox } from '../../src/secrets.js';
import { factories } from '../support/factories.js';
import { buildTestApp, INSTANT_DURATIONS, type Json, SECRET_KEY, uniqueName } from '../support/harness.js';
import { type Running, runCli } from '../support/process.js';

// Issue 30: two `hostplane agent` processes (the simulated driver each, DATA_DIR of their own) and the
// control plane (HOSTING_DRIVER=fleet) listening on 127.0.0.1. The control plane's clock is manual
// (its jobs run through runJobs); the agents run on real time.
const t = await buildTestApp({ env: { HOSTING_DRIVER: 'fleet', FLEET_SILENT_SECONDS: '30' } });
const f = factories(t);
await t.app.listen({ port: 0, host: '127.0.0.1' });
const address = t.app.server.address();
const url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
const work = fs.mkdtempSync(path.join(os.tmpdir(), 'hostplane-agents-'));
const running = new Set<Running>();
after(async () => {
  for (const agent of running) agent.child.kill('SIGKILL');
  await Promise.all([...running].map((a) => a.exited));
  fs.rmSync(work, { recursive: true, force: true });
});

function startAgent(name: string, token?: string, env: Record<string, string> = {}) {
  const agent = runCli(['agent'], {
    DATA_DIR: path.join(work, name),
    HOSTING_DRIVER: 'simulated',
    SIMULATED_DURATIONS: INSTANT_DURATIONS,
    AGENT_CONTROL_PLANE_URL: url,
    AGENT_HEARTBEAT_SECONDS: '1',
    ...(token && { AGENT_ENROLMENT_TOKEN: token }),
    ...env,
  });
  running.add(agent);
  return agent;
}

async function until<T>(what: string, probe: () => Promise<T | null | undefined | false>, ms = 60_000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) {
      const outputs = [...running].map((a) => a.output()).join('\n---\n');
      throw new Error(
        `timed out waiting for ${what}; agents:\n${outputs}\njobs:\n${JSON.stringify(t.jobLog.slice(-5))}`,
      );
    }
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** Moves the control plane's clock past the remote driver's ask-again and runs the due jobs. */
async function tick() {
  t.clock.advance(2500);
  await t.runJobs();
}

const installsOn = async (serverId: string) =>
  (await t.admin.get(`/admin/v1/servers/${serverId}/installs`)).body.results.map((p: Json) => p.install_id);

/** A server of its own region (capacity 5) and its enrolment token. */
async function serverOfOwnRegion(prefix: string) {
  const region = uniqueName('r-');
  const created = await t.admin.post('/admin/v1/servers', {
    name: uniqueName(prefix),
    labels: { region },
    capacity: { installs: 5 },
  });
  assert.equal(created.status, 201);
  return { region, server: created.body.server as Json, token: created.body.enrolment.token as string };
}

/** An account in `region` with an owner and one install, provisioned through the region's agent. */
async function provisionedInstall(region: string) {
  const acct = await f.account({ preferred_data_center: region });
  const owner = await f.user([{ account_id: acct.id, roles: 'owner' }]);
  const site = await f.site(owner.client, acct.id);
  const install = await f.install(owner.client, acct.id, site.id, 'production');
  await t.runJobs();
  await until('the install provisioned', async () => {
    await tick();
    return (await owner.client.get(`/v1/installs/${install.id}`)).body.status === 'active';
  });
  return { owner, install };
}

describe('issue 30: hostplane agent', () => {
  it('issue 30: two agents: placement across them, a call for one never reaches the other, a killed agent silent, its work done once after restart', async () => {
    const region = uniqueName('r-');
    const servers: Json[] = [];
    const agents: Running[] = [];
    for (const name of ['a', 'b']) {
      const created = await t.admin.post('/admin/v1/servers', {
        name: uniqueName(`srv-${name}-`),
        labels: { region },
        capacity: { installs: 5 },
      });
      assert.equal(created.status, 201);
      servers.push(created.body.server);
      agents.push(startAgent(name, created.body.enrolment.token));
    }
    for (const server of servers)
      await until('the agents heartbeat', async () => {
        const got = await t.admin.get(`/admin/v1/servers/${server.id}`);
        return got.body.status === 'live' && got.body.enrolled;
      });
    // The credential file is the agent's alone.
    assert.equal(fs.statSync(path.join(work, 'a', 'agent-credential')).mode & 0o777, 0o600);

    const acct = await f.account({ preferred_data_center: region });
    const owner = await f.user([{ account_id: acct.id, roles: 'owner' }]);
    const site = await f.site(owner.client, acct.id);
    const first = await f.install(owner.client, acct.id, site.id, 'production');
    await t.runJobs();
    const second = await f.install(owner.client, acct.id, site.id, 'staging');
    await t.runJobs();
    const active = (id: string) => async () =>
      (await owner.client.get(`/v1/installs/${id}`)).body.status === 'active';
    await until('both installs provisioned through their agents', async () => {
      await tick();
      return (await active(first.id)()) && (await active(second.id)());
    });
    const [onA, onB] = [await installsOn(servers[0].id), await installsOn(servers[1].id)];
    assert.equal(onA.length, 1, 'one install on each server (the most free capacity)');
    assert.equal(onB.length, 1);
    const [agentA, agentB] = agents as [Running, Running];
    // An agent logs a call's outcome after its report: an install seen active may not have its line yet.
    await agentA.waitFor(new RegExp(`call provision of install ${onA[0]}: done`), 15_000);
    await agentB.waitFor(new RegExp(`call provision of install ${onB[0]}: done`), 15_000);
    assert.ok(!agentA.output().includes(onB[0]), "B's call never reached A");
    assert.ok(!agentB.output().includes(onA[0]), "A's call never reached B");

    // A dies: its server goes silent after missed heartbeats, B stays live; A's backup waits.
    agentA.child.kill('SIGKILL');
    await agentA.exited;
    running.delete(agentA);
    const backup = await owner.client.post(`/v1/installs/${onA[0]}/backups`, {
      description: 'while its server is down',
      notification_emails: ['ops@example.test'],
    });
    assert.equal(backup.status, 202, JSON.stringify(backup.body));
    const operationUrl = `/v1/operations/${/operations\/([0-9a-f-]{36})/.exec(String(backup.headers.location))?.[1]}`;
    await t.runJobs();
    t.clock.advance(31_000);
    await until('B heartbeats after the clock moved', async () => {
      const got = await t.admin.get(`/admin/v1/servers/${servers[1].id}`);
      return got.body.status === 'live';
    });
    assert.equal((await t.admin.get(`/admin/v1/servers/${servers[0].id}`)).body.status, 'silent');
    await tick();
    const operation = await owner.client.get(operationUrl);
    assert.notEqual(operation.body.status, 'failed', JSON.stringify(operation.body));
    assert.notEqual(operation.body.status, 'completed');

    // A comes back (its credential file, no token): the backup runs, once.
    const restarted = startAgent('a');
    await restarted.waitFor(/connected to/);
    await until('the backup completed after the restart', async () => {
      await tick();
      const op = await owner.client.get(operationUrl);
      return op.body.status === 'completed';
    });
    const backups = await owner.client.get(`/v1/installs/${onA[0]}/backups`);
    assert.equal(
      backups.body.results.filter((b: Json) => b.description === 'while its server is down').length,
      1,
    );
    await restarted.waitFor(/call backup of install/, 15_000);
    assert.equal(restarted.output().match(/call backup of install/g)?.length, 1, restarted.output());
  });

  it("issue 30 (decision 228): an agent's report wakes the operation that waits on it: a backup completes with the control plane's clock standing still (not at its ask-again time, FLEET_CHECK_SECONDS later)", async () => {
    const { region, server, token } = await serverOfOwnRegion('srv-wake-');
    // Its backups take a second on the agent (reported pending, then done): the job that asked has
    // long written its ask-again (due) row when the report that settles the call comes.
    startAgent(`wake-${server.id}`, token, {
      SIMULATED_DURATIONS: INSTANT_DURATIONS.replace('backup=0', 'backup=1'),
    });
    await until('the agent heartbeats', async () => {
      const got = await t.admin.get(`/admin/v1/servers/${server.id}`);
      return got.body.status === 'live' && got.body.enrolled;
    });
    const { owner, install } = await provisionedInstall(region);
    const backup = await owner.client.post(`/v1/installs/${install.id}/backups`, {
      description: 'woken by its report',
      notification_emails: ['ops@example.test'],
    });
    assert.equal(backup.status, 202, JSON.stringify(backup.body));
    const operationUrl = `/v1/operations/${/operations\/([0-9a-f-]{36})/.exec(String(backup.headers.location))?.[1]}`;
    const frozenAt = t.clock.now().getTime();
    // The clock does not move from here: only the agent's report can make the operation due again.
    await until('the backup completed without the clock moving', async () => {
      await t.runJobs();
      return (await owner.client.get(operationUrl)).body.status === 'completed';
    });
    assert.equal(t.clock.now().getTime(), frozenAt);
  });

  it("issue 30 (decision 238): an agent's waiting fetch is woken by a call queued for its server (NOTIFY), not found only at its next poll", async () => {
    const { server } = await serverOfOwnRegion('srv-notify-');
    // A fleet calls service of its own over the same database whose poll is longer than the fetch's
    // wait: only the wake-up can hand the call over while the fetch waits.
    const calls = createFleetCalls({
      db: t.database.db,
      clock: t.clock,
      // LISTEN on the test's database (the harness's queue is made without its URL: it polls).
      queue: { ...t.queue, listen: (onWake) => listenForJobs(t.database, t.databaseUrl, onWake) },
      secretBox: createSecretBox(SECRET_KEY),
      fleet: { ...loadConfig({ HOSTING_DRIVER: 'fleet' }).fleet, fetchPollMs: 60_000, fetchWaitSeconds: 30 },
      archiveDir: path.join(work, 'notify-archives'),
    });
    after(() => calls.close());
    // An install placed there (the row alone: no agent runs for this server).
    const installId = randomUUID();
    await t.database.db.execute(
      sql`insert into install_placements (install_id, server_id, generation) values (${installId}, ${server.id}, 1)`,
    );
    const key = randomUUID();
    // Given up after 10 s (a fetch whose caller is gone answers nothing): well before the fetch's own
    // end, whose last look at the queue would find the call without any wake-up.
    const fetching = calls.fetch(server.id as string, 1, 30, AbortSignal.timeout(10_000));
    // The fetch has looked at its (empty) queue and waits.
    await new Promise((resolve) => setTimeout(resolve, 500));
    const asked = await t.app.services.fleetCalls.askOn(
      { method: 'measureDisk', operation: 'measure_disk', key, installId, input: {} },
      { serverId: server.id as string, generation: 1 },
    );
    assert.equal(asked.done, false);
    const handed = await fetching;
    assert.deepEqual(
      handed.map((c) => c.key),
      [key],
    );
  });

  it('issue 30 (decision 232): a call that reaches an agent after the install was deprovisioned there is refused, and the agent does not take the install back', async () => {
    const { region, server, token } = await serverOfOwnRegion('srv-late-');
    const dataDir = path.join(work, `late-${server.id}`);
    const env = { DATA_DIR: dataDir };
    let agent = startAgent(`late-${server.id}`, token, env);
    const live = async () => (await t.admin.get(`/admin/v1/servers/${server.id}`)).body.status === 'live';
    await until('the agent heartbeats', live);
    const { owner, install } = await provisionedInstall(region);
    const [placement] = await queryRows<{ generation: number }>(
      t.database.db,
      sql`select generation from install_placements where install_id = ${install.id}`,
    );
    assert.ok(placement, 'the install is placed');
    // The agent stopped, the install deleted (its deprovision queued on the server), then a routing
    // call queued after it at the same generation: what a call asked in a transaction that committed
    // after the delete's looks like. Both come in the agent's next fetch, the deprovision first.
    agent.child.kill('SIGTERM');
    await agent.exited;
    running.delete(agent);
    assert.equal((await owner.client.delete(`/v1/installs/${install.id}`)).status, 204);
    await t.runJobs();
    const late = await t.app.services.fleetCalls.askOn(
      {
        method: 'applyRouting',
        operation: 'apply_routing',
        key: `late-routing:${install.id}`,
        installId: install.id,
        input: {
          install: { id: install.id, name: install.name },
          default_name: `${install.name}.example.test`,
          domains: [],
          certificates: [],
        },
      },
      { serverId: server.id, generation: placement.generation },
    );
    assert.equal(late.done, false, 'the late call is queued');
    agent = startAgent(`late-${server.id}`, undefined, env);
    const calls = await until('both calls settled', async () => {
      await tick();
      const rows = await queryRows<{ method: string; state: string; error: string | null }>(
        t.database.db,
        sql`select method, state, error, created_at, settled_at from fleet_calls where install_id = ${install.id}
            and method in ('deprovision', 'applyRouting') and (key like 'late-routing:%' or method = 'deprovision')`,
      );
      return rows.length === 2 && rows.every((r) => r.state !== 'queued') ? rows : null;
    });
    const routing = calls.find((c) => c.method === 'applyRouting');
    assert.equal(calls.find((c) => c.method === 'deprovision')?.state, 'done', JSON.stringify(calls));
    assert.equal(routing?.state, 'failed', `${JSON.stringify(calls)}\n${agent.output()}`);
    assert.match(String(routing?.error), /was removed from this server/);
    // The agent's own record (its DATA_DIR, read with the agent stopped) holds nothing of the install.
    agent.child.kill('SIGTERM');
    await agent.exited;
    running.delete(agent);
    const database = await openConfiguredDatabase(
      loadConfig({ DATA_DIR: dataDir, HOSTING_DRIVER: 'simulated' }),
    );
    try {
      const held = await queryRows<{ id: string }>(
        database.db,
        sql`select install_id as id from simulated_installs where install_id = ${install.id}
            union select id from installs where id = ${install.id}`,
      );
      assert.deepEqual(held, [], 'the agent took the deleted install back');
    } finally {
      await database.close();
    }
  });
});
