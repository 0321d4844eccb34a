// test-db: postgres (the fleet's calls and placements ride on pg-boss queues per server)
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'drizzle-orm';
import { queryRows } from '../../src/db/client.js';
import { createSecretBox } from '../../src/secrets.js';
import { factories } from '../support/factories.js';
import { agentTestTools } from '../support/fleet-agents.js';
import { buildTestApp, INSTANT_DURATIONS, type Json, SECRET_KEY, uniqueName } from '../support/harness.js';
import { type Running, runCli } from '../support/process.js';

// Issue 30: moves of installs between hosting servers, drains, copies across servers. Three
// `hostplane agent` processes run the SIMULATED driver (each its own DATA_DIR, so its own state of
// the installs it holds): the control logic (steps, keys, generations, rollback) is what is tested
// here, not files and databases on disk. The control plane listens on 127.0.0.1 with a manual clock
// (its jobs run through runJobs); the agents run on real time.
const t = await buildTestApp({
  env: {
    HOSTING_DRIVER: 'fleet',
    FLEET_SILENT_SECONDS: '30',
    FLEET_SILENT_FAIL_SECONDS: '60',
    // Decision 241: only a target with an address is forwarded to (server b in one test).
    FLEET_MOVE_FORWARD_SECONDS: '60',
  },
});
const f = factories(t);
await t.app.listen({ port: 0, host: '127.0.0.1' });
const address = t.app.server.address();
const url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
const work = fs.mkdtempSync(path.join(os.tmpdir(), 'hostplane-moves-'));
const running = new Set<Running>();
after(async () => {
  for (const agent of running) agent.child.kill('SIGKILL');
  await Promise.all([...running].map((a) => a.exited));
  fs.rmSync(work, { recursive: true, force: true });
});

function startAgent(name: string, token?: string) {
  const agent = runCli(['agent'], {
    DATA_DIR: path.join(work, name),
    HOSTING_DRIVER: 'simulated',
    SIMULATED_DURATIONS: INSTANT_DURATIONS,
    AGENT_CONTROL_PLANE_URL: url,
    AGENT_HEARTBEAT_SECONDS: '1',
    ...(token && { AGENT_ENROLMENT_TOKEN: token }),
  });
  running.add(agent);
  return agent;
}

const { until, tick, operationIdOf } = agentTestTools(t, running, 200);

/** Ticks until the operation has ended; its record. */
async function ended(operationId: string, what: string) {
  return until(what, async () => {
    await tick();
    const op = await t.admin.get(`/admin/v1/installs/${installOfOp.get(operationId)}/move`);
    const move = op.body.move;
    return move?.operation_id === operationId && ['completed', 'failed'].includes(move.status)
      ? (op.body as Json)
      : null;
  });
}
const installOfOp = new Map<string, string>();

const servers = new Map<string, Json>();
const agents = new Map<string, Running>();
const region = uniqueName('r-');
for (const name of ['a', 'b', 'c']) {
  const created = await t.admin.post('/admin/v1/servers', {
    name: uniqueName(`srv-${name}-`),
    labels: { region },
    capacity: { installs: 20 },
  });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  servers.set(name, created.body.server);
  agents.set(name, startAgent(name, created.body.enrolment.token));
}
const serverId = (name: string) => String(servers.get(name)?.id);
async function allLive() {
  for (const [name, server] of servers)
    await until(`server ${name} live`, async () => {
      const got = await t.admin.get(`/admin/v1/servers/${server.id}`);
      return got.body.status === 'live' && got.body.enrolled;
    });
}
await allLive();

const acct = await f.account({ preferred_data_center: region });
const owner = await f.user([{ account_id: acct.id, roles: 'owner' }]);

/** A provisioned install on `server` (the others cordoned while it is placed). */
async function installOn(
  server: string,
  kind: 'production' | 'staging' | 'development' = 'production',
  siteId?: string,
) {
  const others = [...servers.keys()].filter((n) => n !== server);
  for (const other of others)
    await t.admin.patch(`/admin/v1/servers/${serverId(other)}`, { state: 'cordoned' });
  const site = siteId ?? (await f.site(owner.client, acct.id)).id;
  const target = await f.install(owner.client, acct.id, site, kind);
  await until('the install provisioned', async () => {
    await tick();
    return (await owner.client.get(`/v1/installs/${target.id}`)).body.status === 'active';
  });
  for (const other of others)
    await t.admin.patch(`/admin/v1/servers/${serverId(other)}`, { state: 'active' });
  const view = await t.admin.get(`/admin/v1/installs/${target.id}/move`);
  assert.equal(view.body.server.id, serverId(server), JSON.stringify(view.body));
  return target as Json;
}

/** Starts a move; the operation id. */
async function move(installId: string, to: string | null) {
  const res = await t.admin.post(
    `/admin/v1/installs/${installId}/move`,
    to ? { server_id: serverId(to) } : {},
  );
  assert.equal(res.status, 202, JSON.stringify(res.body));
  const id = operationIdOf(res);
  installOfOp.set(id, installId);
  return id;
}

const count = (agent: string, pattern: RegExp) => agents.get(agent)?.output().match(pattern)?.length ?? 0;

/**
 * `count` once it reached `expected` (or 15 s passed): an agent logs a call's outcome after the control
 * plane took its report, so the line of a call behind a completed operation may still be on its way.
 */
async function counted(agent: string, pattern: RegExp, expected: number) {
  const end = Date.now() + 15_000;
  while (count(agent, pattern) < expected && Date.now() < end) await sleep(50);
  return count(agent, pattern);
}

/** A customer's backup of the install completes (through whichever server holds it). */
async function backupCompletes(installId: string, description: string) {
  const res = await owner.client.post(`/v1/installs/${installId}/backups`, {
    description,
    notification_emails: [],
  });
  assert.equal(res.status, 202, JSON.stringify(res.body));
  const opUrl = `/v1/operations/${operationIdOf(res)}`;
  await until(`backup ${description}`, async () => {
    await tick();
    return (await owner.client.get(opUrl)).body.status === 'completed';
  });
}

describe('issue 30: moving installs between servers', () => {
  it('issue 30: a move (dry run first) copies, switches and cleans; later calls go to the new server only; a call at the old generation is refused', async () => {
    const install = await installOn('a');
    const dry = await t.admin.post(`/admin/v1/installs/${install.id}/move?dry_run=true`, {
      server_id: serverId('b'),
    });
    assert.equal(dry.status, 200, JSON.stringify(dry.body));
    assert.equal(dry.body.dry_run, true);
    assert.equal(dry.body.source_server_id, serverId('a'));
    assert.equal(dry.body.target_server_id, serverId('b'));
    assert.equal(
      (await t.admin.get(`/admin/v1/installs/${install.id}/move`)).body.move,
      null,
      'no move made',
    );

    // Refusals: the server it is on, a cordoned one, an unknown one; a second move while one is open.
    const same = await t.admin.post(`/admin/v1/installs/${install.id}/move`, { server_id: serverId('a') });
    assert.equal(same.status, 400, JSON.stringify(same.body));
    await t.admin.patch(`/admin/v1/servers/${serverId('c')}`, { state: 'cordoned' });
    const cordoned = await t.admin.post(`/admin/v1/installs/${install.id}/move`, {
      server_id: serverId('c'),
    });
    assert.equal(cordoned.status, 400, JSON.stringify(cordoned.body));
    await t.admin.patch(`/admin/v1/servers/${serverId('c')}`, { state: 'active' });
    const unknown = await t.admin.post(`/admin/v1/installs/${install.id}/move`, {
      server_id: '00000000-0000-4000-8000-000000000000',
    });
    assert.equal(unknown.status, 400);

    const opId = await move(install.id, 'b');
    const moving = await t.admin.get(`/admin/v1/installs/${install.id}/move`);
    assert.equal(moving.body.status, 'moving');
    assert.equal(moving.body.server.id, serverId('a'), 'the source serves until the switch');
    const again = await t.admin.post(`/admin/v1/installs/${install.id}/move`, { server_id: serverId('c') });
    assert.equal(again.status, 409, JSON.stringify(again.body));
    // A write waits for the move (a restore would be lost by it); the customer sees the move operation.
    const ops = await owner.client.get(`/v1/installs/${install.id}/operations`);
    assert.ok(ops.body.results.some((o: Json) => o.id === opId && o.type === 'move_install'));

    const done = await ended(opId, 'the move completed');
    assert.equal(done.move.status, 'completed', JSON.stringify(done));
    assert.equal(done.status, 'placed');
    assert.deepEqual(done.server, { id: serverId('b'), name: servers.get('b')?.name, generation: 2 });
    const onA = await t.admin.get(`/admin/v1/servers/${serverId('a')}/installs`);
    assert.ok(!onA.body.results.some((p: Json) => p.install_id === install.id));
    // Each step once: two backups on the source, two restores and one check on the target, one clean-up.
    const id = install.id as string;
    assert.equal(
      await counted('a', new RegExp(`call backup of install ${id}: done`, 'g'), 2),
      2,
      agents.get('a')?.output(),
    );
    assert.equal(await counted('b', new RegExp(`call restore of install ${id}: done`, 'g'), 2), 2);
    assert.equal(await counted('b', new RegExp(`call backup of install ${id}: done`, 'g'), 1), 1);
    assert.equal(await counted('a', new RegExp(`call deprovision of install ${id}: done`, 'g'), 1), 1);

    // Later calls: the new server only.
    const before = count('a', new RegExp(id, 'g'));
    await backupCompletes(id, 'after the move');
    assert.equal(await counted('b', new RegExp(`call backup of install ${id}: done`, 'g'), 2), 2);
    assert.equal(count('a', new RegExp(id, 'g')), before, 'nothing more reached the source');

    // A call at the old generation: a move's own call is refused (stale), any other is re-routed.
    const calls = t.app.services.fleetCalls;
    const at = { serverId: serverId('a'), generation: 1 };
    const input = { install_id: id, type: 'page' };
    const spec = (key: string) => ({
      method: 'purgeCache',
      operation: 'purge_cache' as const,
      key,
      installId: id,
      input,
    });
    await calls.askOn(spec(`move:${opId}:late`), at);
    await calls.askOn(spec('issue-30-old-generation'), at);
    const refused = await until('the stale call refused', async () => {
      try {
        const answer = await calls.askOn(spec(`move:${opId}:late`), at);
        return answer.done ? 'done?' : null;
      } catch (err) {
        return (err as Error).message;
      }
    });
    assert.match(refused, /stale placement/);
    const rerouted = await until('the other call re-routed to b', async () => {
      const answer = await calls.askOn(spec('issue-30-old-generation'), at);
      return answer.done;
    });
    assert.ok(rerouted);
    assert.equal(count('a', new RegExp(id, 'g')), before, 'the source was handed neither');
  });

  it("issue 30 (decision 241): after the switch the source passes the install's requests to the target's address for FLEET_MOVE_FORWARD_SECONDS, then is cleaned; meanwhile the move holds no write", async () => {
    const address = '192.0.2.41';
    await t.admin.patch(`/admin/v1/servers/${serverId('b')}`, { ipv4: [address] });
    try {
      const install = await installOn('a');
      const id = install.id as string;
      await backupCompletes(id, 'before the forwarding');
      const opId = await move(id, 'b');
      const forwardCall = async () => {
        const [row] = await queryRows<{ id: string; state: string; input_sealed: string }>(
          t.database.db,
          sql`select id, state, input_sealed from fleet_calls where key = ${`move:${opId}:forward-source`}`,
        );
        return row;
      };
      const forwarding = await until('the source forwards', async () => {
        await tick();
        const call = await forwardCall();
        return call?.state === 'done' && call;
      });
      const routing = JSON.parse(
        createSecretBox(SECRET_KEY)
          .open(forwarding.input_sealed, `fleet-call:${forwarding.id}`)
          .toString('utf8'),
      ) as Json;
      assert.equal(routing.forward_to, address, "the source is told the new server's address");
      assert.equal(routing.frozen, false);
      await tick();
      const view = (await t.admin.get(`/admin/v1/installs/${id}/move`)).body;
      assert.equal(view.status, 'moving', JSON.stringify(view));
      assert.equal(view.move.phase, 'switched');
      assert.equal(view.server.id, serverId('b'), 'the target serves it');
      // The grace (FLEET_MOVE_FORWARD_SECONDS, 60 s here) from the switch, on the control plane's clock.
      const left = Date.parse(view.move.forward_until) - t.clock.now().getTime();
      assert.ok(left > 30_000 && left <= 60_000, `forwarding for ${left} ms more`);
      assert.equal(count('a', new RegExp(`call deprovision of install ${id}`, 'g')), 0, 'not cleaned yet');
      // A write is not held by the forwarding move: a restore runs on the new server.
      const listed = (await owner.client.get(`/v1/installs/${id}/backups`)).body.results as Json[];
      const backup = listed.find((b) => b.description === 'before the forwarding');
      assert.ok(backup, JSON.stringify(listed));
      const restore = await owner.client.post(`/v1/installs/${id}/backups/${backup.id}/restore`, {
        notification_emails: [],
        create_checkpoint: false,
      });
      assert.equal(restore.status, 202, JSON.stringify(restore.body));
      const restored = await until('the restore during the forwarding', async () => {
        await tick();
        const got = (await owner.client.get(`/v1/operations/${operationIdOf(restore)}`)).body;
        return ['completed', 'failed'].includes(got.status) && got;
      });
      assert.equal(restored.status, 'completed', JSON.stringify(restored));
      assert.equal(count('a', new RegExp(`call deprovision of install ${id}`, 'g')), 0, 'still forwarding');
      // Past the grace (the clock moves on with each tick): the source cleaned, the move completed.
      const done = await ended(opId, 'the move completed after its grace');
      assert.equal(done.move.status, 'completed', JSON.stringify(done));
      assert.equal(await counted('a', new RegExp(`call deprovision of install ${id}: done`, 'g'), 1), 1);
    } finally {
      await t.admin.patch(`/admin/v1/servers/${serverId('b')}`, { ipv4: [] });
    }
  });

  it('issue 30 (decision 226): backups taken before and during a move are carried to the target: listed after it, each restores there, the source cleaned', async () => {
    const install = await installOn('a', 'production');
    const id = install.id as string;
    await backupCompletes(id, 'before the move');
    const opId = await move(id, 'b');
    // A customer's backup while the move runs (a read: it does not wait for the move). Wherever it
    // lands (carried with the others, or the switch waiting for it), it must survive the move.
    const during = await owner.client.post(`/v1/installs/${id}/backups`, {
      description: 'during the move',
      notification_emails: [],
    });
    assert.equal(during.status, 202, JSON.stringify(during.body));
    const done = await ended(opId, 'the move with backups');
    assert.equal(done.move.status, 'completed', JSON.stringify(done));
    assert.equal(done.server.id, serverId('b'));
    const duringOp = (await owner.client.get(`/v1/operations/${operationIdOf(during)}`)).body;
    assert.equal(duringOp.status, 'completed', 'the backup taken during the move ended before the switch');
    // Each backup exported once by the source and kept once by the target.
    const listed = (await owner.client.get(`/v1/installs/${id}/backups`)).body.results as Json[];
    const taken = listed.filter((b) =>
      ['before the move', 'during the move'].includes(String(b.description)),
    );
    assert.deepEqual(taken.map((b) => b.status).sort(), ['completed', 'completed'], JSON.stringify(listed));
    assert.equal(await counted('a', new RegExp(`call exportArchive of install ${id}: done`, 'g'), 2), 2);
    assert.equal(await counted('b', new RegExp(`call adoptBackup of install ${id}: done`, 'g'), 2), 2);
    assert.equal(await counted('a', new RegExp(`call deprovision of install ${id}: done`, 'g'), 1), 1);
    // Each restores on the new server (the source holds nothing of the install any more).
    const before = count('a', new RegExp(id, 'g'));
    for (const backup of taken) {
      const restore = await owner.client.post(`/v1/installs/${id}/backups/${backup.id}/restore`, {
        notification_emails: [],
        create_checkpoint: false,
      });
      assert.equal(restore.status, 202, JSON.stringify(restore.body));
      const op = await until(`the restore of ${backup.description}`, async () => {
        await tick();
        const got = (await owner.client.get(`/v1/operations/${operationIdOf(restore)}`)).body;
        return ['completed', 'failed'].includes(got.status) && got;
      });
      assert.equal(op.status, 'completed', JSON.stringify(op));
    }
    assert.equal(
      await counted('b', new RegExp(`call restore of install ${id}: done`, 'g'), 4),
      4,
      'two for the move, two after',
    );
    assert.equal(count('a', new RegExp(id, 'g')), before, 'nothing more reached the source');
  });

  it('issue 30: a cancelled move rolls back and the source keeps serving; cancel without a move is a 409', async () => {
    const install = await installOn('a', 'staging');
    const none = await t.admin.post(`/admin/v1/installs/${install.id}/move/cancel`);
    assert.equal(none.status, 409);
    const opId = await move(install.id, 'c');
    const cancelled = await t.admin.post(`/admin/v1/installs/${install.id}/move/cancel`);
    assert.equal(cancelled.status, 200, JSON.stringify(cancelled.body));
    assert.equal(cancelled.body.move.cancel_requested, true);
    const done = await ended(opId, 'the cancelled move rolled back');
    assert.equal(done.move.status, 'failed');
    assert.match(done.move.error, /rolled back \(cancelled\)/);
    assert.equal(done.status, 'move_failed');
    assert.deepEqual(done.server, { id: serverId('a'), name: servers.get('a')?.name, generation: 1 });
    await backupCompletes(install.id, 'after the cancel');
    // A new move after a failed one works (a failed move never locks the install).
    const next = await move(install.id, 'b');
    assert.equal((await ended(next, 'the next move')).move.status, 'completed');
  });

  it('issue 30: the worker racing itself and an agent killed mid-move: every step once, one owner', async () => {
    const install = await installOn('b');
    const id = install.id as string;
    const opId = await move(id, 'c');
    const handler = t.app.services.jobHandlers.move_install;
    const ctx = () => ({ jobId: opId, attempt: 1, lastAttempt: false, signal: new AbortController().signal });
    // A second worker (one that took the step while the first was thought dead) runs each step too.
    await tick();
    await Promise.all([
      handler.run({ operation_id: opId }, ctx()),
      handler.run({ operation_id: opId }, ctx()),
    ]);
    // The target's agent dies after its first call and comes back.
    await until('the target ran its first restore', async () => {
      await tick();
      return count('c', new RegExp(`call restore of install ${id}: done`)) > 0;
    });
    const c = agents.get('c') as Running;
    c.child.kill('SIGKILL');
    await c.exited;
    running.delete(c);
    const restarted = startAgent('c');
    await restarted.waitFor(/connected to/);
    const outputBefore = c.output();
    agents.set('c', restarted);
    const done = await until('the move completed after the restart', async () => {
      await tick();
      await handler.run({ operation_id: opId }, ctx()).catch(() => undefined);
      const view = (await t.admin.get(`/admin/v1/installs/${id}/move`)).body;
      return ['completed', 'failed'].includes(view.move?.status) ? view : null;
    });
    assert.equal(done.move.status, 'completed', JSON.stringify(done));
    assert.equal(done.server.id, serverId('c'));
    const restores =
      (outputBefore.match(new RegExp(`call restore of install ${id}: done`, 'g'))?.length ?? 0) +
      count('c', new RegExp(`call restore of install ${id}: done`, 'g'));
    assert.ok(
      restores >= 2 && restores <= 3,
      `two restores (one maybe reported twice after the kill): ${restores}`,
    );
    assert.equal(
      await counted('b', new RegExp(`call backup of install ${id}: done`, 'g'), 2),
      2,
      'two source backups',
    );
    assert.equal(await counted('b', new RegExp(`call deprovision of install ${id}: done`, 'g'), 1), 1);
    // Exactly one server owns it.
    const owners = [];
    for (const name of servers.keys()) {
      const placed = await t.admin.get(`/admin/v1/servers/${serverId(name)}/installs`);
      if (placed.body.results.some((p: Json) => p.install_id === id)) owners.push(name);
    }
    assert.deepEqual(owners, ['c']);
  });
  it('issue 30: a destination that dies mid-move: the move rolls back, the source serves throughout', async () => {
    const install = await installOn('a', 'development');
    const id = install.id as string;
    const c = agents.get('c') as Running;
    const opId = await move(id, 'c');
    c.child.kill('SIGKILL');
    await c.exited;
    running.delete(c);
    await tick();
    await until('the source backup done', async () => {
      await tick();
      return count('a', new RegExp(`call backup of install ${id}: done`)) > 0;
    });
    // c is silent after FLEET_SILENT_SECONDS, its call given up after FLEET_SILENT_FAIL_SECONDS; the
    // rollback's clean-up of c waits the same and is given up too (c holds an unused leftover).
    for (const step of [31_000, 61_000, 61_000, 61_000]) {
      t.clock.advance(step);
      await tick();
      const view = (await t.admin.get(`/admin/v1/installs/${id}/move`)).body;
      assert.equal(view.server.id, serverId('a'), 'the source owns it at every step');
      if (view.move.status === 'failed') break;
    }
    const done = await ended(opId, 'the move rolled back');
    assert.equal(done.move.status, 'failed');
    assert.match(done.move.error, /rolled back/);
    assert.equal(done.status, 'move_failed');
    assert.deepEqual(done.server, { id: serverId('a'), name: servers.get('a')?.name, generation: 1 });
    const restarted = startAgent('c');
    await restarted.waitFor(/connected to/);
    agents.set('c', restarted);
    await allLive();
    await backupCompletes(id, 'after the failed move');
  });

  it('issue 30: copy across servers: the source backed up on its server, copied into the destination on its own', async () => {
    const source = await installOn('a', 'production');
    const siteId = source.site_id as string;
    const destination = await installOn('c', 'staging', siteId);
    const res = await owner.client.post('/v1/install_copy', {
      source_environment_id: source.id,
      destination_environment_id: destination.id,
      notification_emails: [],
    });
    assert.equal(res.status, 202, JSON.stringify(res.body));
    const opUrl = `/v1/operations/${operationIdOf(res)}`;
    const op = await until('the copy ended', async () => {
      await tick();
      const got = await owner.client.get(opUrl);
      return ['completed', 'failed'].includes(got.body.status) ? got.body : null;
    });
    assert.equal(op.status, 'completed', JSON.stringify(op));
    assert.equal(await counted('a', new RegExp(`call backup of install ${source.id}: done`, 'g'), 1), 1);
    assert.equal(count('c', new RegExp(`call copy of install ${destination.id}: done`, 'g')), 1);
    assert.equal(count('a', new RegExp(`${destination.id}`, 'g')), 0, 'nothing of the destination on a');
  });

  it('issue 30: drain moves every install with progress on the server, the draining server gets no new installs; undrain rolls back moves not switched', async () => {
    for (const kind of ['production', 'staging'] as const) await installOn('b', kind);
    const placed = (await t.admin.get(`/admin/v1/servers/${serverId('b')}/installs`)).body.count as number;
    assert.ok(placed >= 2);
    const drain = await t.admin.post(`/admin/v1/servers/${serverId('b')}/drain`);
    assert.equal(drain.status, 200, JSON.stringify(drain.body));
    assert.equal(drain.body.started.length, placed, JSON.stringify(drain.body));
    const draining = (await t.admin.get(`/admin/v1/servers/${serverId('b')}`)).body;
    assert.equal(draining.state, 'draining');
    assert.deepEqual(
      { ...draining.drain, drain_id: undefined },
      { drain_id: undefined, moved: 0, moving: placed, failed: 0 },
    );
    // A new install while b drains lands elsewhere.
    const fresh = await f.install(
      owner.client,
      acct.id,
      (await f.site(owner.client, acct.id)).id,
      'production',
    );
    const progress = await until('the drain finished', async () => {
      await tick();
      const got = (await t.admin.get(`/admin/v1/servers/${serverId('b')}`)).body;
      return got.drain.moving === 0 ? got : null;
    });
    assert.deepEqual(
      { moved: progress.drain.moved, failed: progress.drain.failed, installs: progress.installs },
      { moved: placed, failed: 0, installs: 0 },
    );
    const freshView = (await t.admin.get(`/admin/v1/installs/${fresh.id}/move`)).body;
    assert.notEqual(freshView.server?.id, serverId('b'));

    // c drained and undrained at once: its moves roll back, its installs stay.
    const onC = (await t.admin.get(`/admin/v1/servers/${serverId('c')}/installs`)).body.count as number;
    const drainC = await t.admin.post(`/admin/v1/servers/${serverId('c')}/drain`);
    assert.equal(drainC.body.started.length, onC, JSON.stringify(drainC.body));
    const undrain = await t.admin.post(`/admin/v1/servers/${serverId('c')}/undrain`);
    assert.equal(undrain.status, 200, JSON.stringify(undrain.body));
    assert.equal(undrain.body.cancelled, onC);
    assert.equal(undrain.body.server.state, 'active');
    const back = await until('the undrained moves rolled back', async () => {
      await tick();
      const got = (await t.admin.get(`/admin/v1/servers/${serverId('c')}`)).body;
      return got.drain.moving === 0 ? got : null;
    });
    assert.deepEqual(
      { moved: back.drain.moved, failed: back.drain.failed, installs: back.installs },
      { moved: 0, failed: onC, installs: onC },
    );
    await t.admin.post(`/admin/v1/servers/${serverId('b')}/undrain`);
  });

  it("issue 30: the move and drain routes are the admin token's only", async () => {
    const install = await installOn('a', 'production');
    for (const [method, route] of [
      ['GET', `/admin/v1/installs/${install.id}/move`],
      ['POST', `/admin/v1/installs/${install.id}/move`],
      ['POST', `/admin/v1/installs/${install.id}/move/cancel`],
      ['POST', `/admin/v1/servers/${serverId('a')}/drain`],
      ['POST', `/admin/v1/servers/${serverId('a')}/undrain`],
    ] as const) {
      // A customer's credential is not the admin token: 401, as for every admin route (security.ts).
      const asOwner = await owner.client.request(method, route, method === 'POST' ? {} : undefined);
      assert.equal(asOwner.status, 401, `${method} ${route}`);
      const anonymous = await t.anonymous.request(method, route, method === 'POST' ? {} : undefined);
      assert.equal(anonymous.status, 401, `${method} ${route}`);
    }
    assert.equal((await t.admin.get(`/admin/v1/servers/${serverId('a')}`)).body.state, 'active');
    assert.equal((await t.admin.get(`/admin/v1/installs/${install.id}/move`)).body.move, null);
  });
});
