/**
 * `npm run bench:fleet-provision [-- --installs 10 --label L]` (issue 30), as root: provisioning through an agent
 * next to the local driver, in one run, interleaved (local, agent, local, agent, ...).
 *
 * - local: `hostplane serve` with HOSTING_DRIVER=local (LOCAL_WEB=on: nginx, PHP-FPM, WordPress, the
 *   machine's MariaDB), its worker in-process: what `npm start` on one machine does.
 * - agent: `hostplane serve` with HOSTING_DRIVER=fleet and one `hostplane agent` on this machine
 *   (loopback, no namespace: the same CPU, disk and MariaDB as the local side; the control plane on
 *   127.0.0.1), its agent running the same local driver with LOCAL_WEB=on on other ports.
 *
 * Each install: `POST /v1/installs` sent -> its provision operation (`GET /v1/installs/{id}/operations`)
 * polled every 50 ms (the resolution) until `completed`. Also the operation's own completed_at minus
 * created_at (server side). Both control planes run on throwaway PostgreSQL databases with the system
 * clock and default settings. Everything made is removed at the end, on failure and on SIGINT/SIGTERM.
 * Writes bench/results/fleet-provision[-L].{md,json}.
 */
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { localHosting } from '../test/support/local-hosting.js';
import { runCli } from '../test/support/process.js';
import { freePort, stopWebTier } from '../test/support/web-tier.js';
import {
  type ControlPlane,
  createInstall,
  enrol,
  expect,
  loadavg,
  onCleanup,
  runBench,
  sleep,
  startControlPlane,
  summary,
  until,
  writeResults,
} from './fleet.js';

const { values: args } = parseArgs({
  options: {
    installs: { type: 'string', default: '10' },
    label: { type: 'string', default: '' },
    'sweep-ms': { type: 'string', default: '' },
  },
});
const INSTALLS = Number(args.installs);
const POLL_MS = 50;
/** JOB_SWEEP_INTERVAL_MS of both control planes (default: theirs, 1000). */
const SWEEP: Record<string, string> = args['sweep-ms'] ? { JOB_SWEEP_INTERVAL_MS: args['sweep-ms'] } : {};

/** A HOSTING_ROOT (and the MariaDB databases/users of its installs) removed at the clean-up. */
async function hostingRoot(installIds: Set<string>) {
  const host = await localHosting({ autoCleanup: false });
  onCleanup(async () => {
    await stopWebTier(path.join(host.root, 'web'), installIds);
    // A pool's workers may outlive the first userdel by a moment: once more after they are gone.
    await sleep(2000);
    await stopWebTier(path.join(host.root, 'web'), installIds);
    for (const id of installIds) host.paths(id);
    await host.cleanup();
  });
  return host;
}

interface Measured {
  side: 'local' | 'agent';
  client_s: number;
  server_s: number;
  /** The operation's created_at -> started_at (its job picked up). */
  start_s: number;
  /** Through an agent: the provision call asked -> settled (the agent's fetch, work and report). */
  call_s?: number;
  /** Through an agent: the call settled -> the operation completed (the control plane asking again). */
  after_s?: number;
  operationId: string;
}

/** One install provisioned through `cp`'s API: seconds from the POST to `completed` seen. */
async function provisionOne(cp: ControlPlane, name: string, ids: Set<string>) {
  const { install, sent } = await createInstall(cp, name);
  ids.add(install.id);
  const list = expect(await cp.owner('GET', `/v1/installs/${install.id}/operations`), 200, 'operations');
  const op = (list.results as { id: string; type: string }[]).find((o) => /provision/.test(o.type));
  if (!op) throw new Error(`no provision operation: ${JSON.stringify(list.results)}`);
  for (;;) {
    const got = expect(await cp.owner('GET', `/v1/operations/${op.id}`), 200, 'operation');
    if (got.status === 'completed')
      return {
        client_s: (performance.now() - sent) / 1000,
        server_s: (Date.parse(got.completed_at) - Date.parse(got.created_at)) / 1000,
        start_s: (Date.parse(got.started_at) - Date.parse(got.created_at)) / 1000,
        completedAt: Date.parse(got.completed_at),
        operationId: op.id,
      };
    if (got.status === 'failed') throw new Error(`provision failed: ${JSON.stringify(got)}`);
    await sleep(POLL_MS);
  }
}

async function main() {
  if (process.getuid?.() !== 0) throw new Error('run as root (system users, nginx, PHP-FPM)');
  const loadAtStart = loadavg();
  const localIds = new Set<string>();
  const agentIds = new Set<string>();
  const localHost = await hostingRoot(localIds);
  const local = await startControlPlane('prov-local', {
    ...SWEEP,
    ...localHost.env,
    LOCAL_WEB: 'on',
    HOSTING_HTTP_PORT: String(await freePort()),
    HOSTING_HTTPS_PORT: String(await freePort()),
  });
  const agentHost = await hostingRoot(agentIds);
  const fleet = await startControlPlane('prov-fleet', { ...SWEEP, HOSTING_DRIVER: 'fleet' });
  const fleetDb = new pg.Client({ connectionString: fleet.databaseUrl });
  await fleetDb.connect();
  onCleanup(() => fleetDb.end());
  /** Where an agent-side install's time went: its provision call's asked and settled times. */
  const callOf = async (operationId: string, completedAt: number) => {
    const { rows } = await fleetDb.query<{ created_at: Date; settled_at: Date }>(
      `select created_at, settled_at from fleet_calls where key = $1 and method = 'provision'`,
      [operationId],
    );
    const row = rows[0];
    return row
      ? {
          call_s: (row.settled_at.getTime() - row.created_at.getTime()) / 1000,
          after_s: (completedAt - row.settled_at.getTime()) / 1000,
        }
      : {};
  };
  const server = await enrol(fleet, 'prov-agent', ['127.0.0.1']);
  const agent = runCli(['agent'], {
    ...agentHost.env,
    DATA_DIR: path.join(agentHost.root, 'agent-data'),
    LOCAL_WEB: 'on',
    HOSTING_HTTP_PORT: String(await freePort()),
    HOSTING_HTTPS_PORT: String(await freePort()),
    AGENT_CONTROL_PLANE_URL: fleet.base,
    AGENT_ENROLMENT_TOKEN: server.token,
    LOG_LEVEL: 'info',
  });
  // Stopped before the web tier's clean-up (registered earlier, so it runs later).
  onCleanup(async () => {
    agent.child.kill('SIGTERM');
    await Promise.race([agent.exited, sleep(10_000)]);
    agent.child.kill('SIGKILL');
  });
  await agent.waitFor(/connected to/, 120_000);
  await until('the server live', async () => {
    const got = expect(await fleet.admin('GET', `/admin/v1/servers/${server.id}`), 200, 'server');
    return got.status === 'live';
  });

  // One of each first, not measured: the first nginx/PHP-FPM start and WordPress copy of each side.
  await provisionOne(local, `warmlocal${process.pid}`, localIds);
  await provisionOne(fleet, `warmagent${process.pid}`, agentIds);
  const measured: Measured[] = [];
  for (let i = 0; i < INSTALLS; i++)
    for (const side of ['local', 'agent'] as const) {
      const cp = side === 'local' ? local : fleet;
      const { completedAt, ...got } = await provisionOne(
        cp,
        `p${side[0]}${i}x${process.pid}`,
        side === 'local' ? localIds : agentIds,
      );
      measured.push({ side, ...got, ...(side === 'agent' && (await callOf(got.operationId, completedAt))) });
      process.stdout.write(
        `${side} ${i + 1}/${INSTALLS}: ${got.client_s.toFixed(2)} s (operation ${got.server_s.toFixed(2)} s)\n`,
      );
    }
  const of = (side: Measured['side'], k: 'client_s' | 'server_s' | 'start_s' | 'call_s' | 'after_s') =>
    summary(measured.filter((m) => m.side === side).map((m) => m[k] ?? Number.NaN));
  const result = {
    date: new Date().toISOString(),
    installs_per_side: INSTALLS,
    poll_ms: POLL_MS,
    loadavg_at_start: loadAtStart,
    loadavg_at_end: loadavg(),
    cores: os.cpus().length,
    job_sweep_interval_ms: Number(args['sweep-ms'] || 1000),
    local: {
      client_s: of('local', 'client_s'),
      operation_s: of('local', 'server_s'),
      start_s: of('local', 'start_s'),
    },
    agent: {
      client_s: of('agent', 'client_s'),
      operation_s: of('agent', 'server_s'),
      start_s: of('agent', 'start_s'),
      call_s: of('agent', 'call_s'),
      after_s: of('agent', 'after_s'),
    },
    ratio_p50: Math.round((of('agent', 'client_s').p50 / of('local', 'client_s').p50) * 100) / 100,
    measured,
  };
  const row = (name: string, s: ReturnType<typeof summary>) =>
    `| ${name} | ${s.n} | ${s.p50} | ${s.p90} | ${s.max} |`;
  const md = `# bench:fleet-provision (issue 30), ${result.date}

${result.cores} cores, load average at start ${result.loadavg_at_start}, at end ${result.loadavg_at_end}.
${INSTALLS} installs per side, interleaved (local, agent, ...), after one unmeasured install each; the
operation polled every ${POLL_MS} ms; JOB_SWEEP_INTERVAL_MS ${result.job_sweep_interval_ms} on both. **Agent p50 / local p50: ${result.ratio_p50}** (goal <= 1.2).

| side | n | p50 s | p90 s | max s |
|---|---|---|---|---|
${row('local driver: POST /v1/installs -> operation completed (client)', result.local.client_s)}
${row('through an agent: the same', result.agent.client_s)}
${row('local driver: operation created_at -> completed_at', result.local.operation_s)}
${row('through an agent: the same', result.agent.operation_s)}
${row('local driver: operation created -> started (its job picked up)', result.local.start_s)}
${row('through an agent: the same', result.agent.start_s)}
${row('through an agent: provision call asked -> settled (fetch, work, report)', result.agent.call_s)}
${row('through an agent: call settled -> operation completed (asked again)', result.agent.after_s)}
`;
  writeResults(`fleet-provision${args.label ? `-${args.label}` : ''}`, result, md);
}

await runBench(main);
