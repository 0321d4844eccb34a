/**
 * `npm run bench:fleet-silence [-- --minutes 10 --trials 5 --loaded-minutes 3]` (issue 30, as root or
 * not): detection of a silent hosting server. A control plane (`hostplane serve`, HOSTING_DRIVER=fleet,
 * the default FLEET_SILENT_SECONDS) and three loopback agents (`hostplane agent`, the default
 * AGENT_HEARTBEAT_SECONDS; no web tier: their heartbeats are the subject). Agent 2 reaches the control
 * plane through a TCP proxy (test/support/tcp-proxy.ts) whose `freeze` cut is its link cut (no reset,
 * no byte passes: a partition).
 *
 * For `--minutes`, the admin API's servers list is sampled every second. Agent 0 is never touched;
 * agents 1 and 2 take turns in trials: agent 1 SIGKILLed (then started again), agent 2's link cut (then
 * restored), `--trials` each: seconds from the fault to the first sample showing the server silent, and
 * from the agent's return to the first sample showing it live. A server shown silent outside its own
 * trial (from the fault to shown live again) is a false silence. For `--loaded-minutes` in the middle
 * of the run two busy loops (`node -e 'for(;;){}'`) load the two cores.
 * Writes bench/results/fleet-silence.{md,json}.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { loadConfig } from '../src/config.js';
import { type Running, runCli } from '../test/support/process.js';
import { startTcpProxy } from '../test/support/tcp-proxy.js';
import {
  enrol,
  loadavg,
  onCleanup,
  runBench,
  sleep,
  startControlPlane,
  statuses,
  summary,
  until,
  writeResults,
} from './fleet.js';

const { values: args } = parseArgs({
  options: {
    minutes: { type: 'string', default: '10' },
    trials: { type: 'string', default: '5' },
    'loaded-minutes': { type: 'string', default: '3' },
  },
});
const RUN_MS = Number(args.minutes) * 60_000;
const TRIALS = Number(args.trials);
const LOADED_MS = Number(args['loaded-minutes']) * 60_000;

interface Sample {
  at: number;
  status: string[];
}
interface Trial {
  kind: 'kill' | 'cut';
  server: number;
  faultAt: number;
  silentAt: number | null;
  backAt: number | null;
  liveAt: number | null;
  loaded: boolean;
}

async function main() {
  const defaults = loadConfig({ DATA_DIR: os.tmpdir() });
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'hostplane-silence-'));
  onCleanup(() => fs.rmSync(work, { recursive: true, force: true }));
  const cp = await startControlPlane('silence', { HOSTING_DRIVER: 'fleet' });
  const port = Number(new URL(cp.base).port);
  const proxy = await startTcpProxy(port);
  onCleanup(() => proxy.close());
  const ids: string[] = [];
  const agents: (Running | null)[] = [null, null, null];
  const env = (i: number) => ({
    DATA_DIR: path.join(work, `agent-${i}`),
    HOSTING_DRIVER: 'local',
    HOSTING_ROOT: path.join(work, `hosting-${i}`),
    AGENT_CONTROL_PLANE_URL: i === 2 ? `http://127.0.0.1:${proxy.port}` : cp.base,
    LOG_LEVEL: 'info',
  });
  const start = (i: number, token?: string) => {
    const agent = runCli(['agent'], { ...env(i), ...(token && { AGENT_ENROLMENT_TOKEN: token }) });
    agents[i] = agent;
    return agent;
  };
  onCleanup(() => {
    for (const a of agents) a?.child.kill('SIGKILL');
  });
  for (let i = 0; i < 3; i++) {
    fs.mkdirSync(env(i).DATA_DIR, { recursive: true });
    const server = await enrol(cp, `silence-${i}`, [`192.0.2.${10 + i}`]);
    ids.push(server.id);
    await start(i, server.token).waitFor(/connected to/);
  }
  await until('three servers live', async () => {
    const s = await statuses(cp);
    return ids.every((id) => s.get(id) === 'live');
  });

  const began = Date.now();
  const samples: Sample[] = [];
  const trials: Trial[] = [];
  const loads: string[] = [];
  let stop = false;
  let loaded = false;
  // Every second, independent of how long the request took (a late sample is still one sample).
  const sampler = (async () => {
    let next = Date.now();
    while (!stop) {
      const s = await statuses(cp).catch(() => null);
      if (s) samples.push({ at: Date.now(), status: ids.map((id) => s.get(id) ?? '?') });
      if (samples.length % 30 === 0) loads.push(`${Math.round((Date.now() - began) / 1000)} s: ${loadavg()}`);
      next += 1000;
      await sleep(Math.max(0, next - Date.now()));
    }
  })();
  const seen = async (server: number, status: string, since: number) =>
    until(
      `server ${server} ${status}`,
      async () => samples.find((s) => s.at >= since && s.status[server] === status)?.at,
      180_000,
      100,
    );

  // The busy loops: the middle of the run.
  const busy: ChildProcess[] = [];
  const loadStart = Math.max(0, (RUN_MS - LOADED_MS) / 2);
  const loader = (async () => {
    await sleep(loadStart);
    if (stop || LOADED_MS <= 0) return;
    loaded = true;
    for (let k = 0; k < 2; k++) busy.push(spawn(process.execPath, ['-e', 'for(;;){}'], { stdio: 'ignore' }));
    await sleep(LOADED_MS);
    for (const b of busy) b.kill('SIGKILL');
    loaded = false;
  })();
  onCleanup(() => {
    for (const b of busy) b.kill('SIGKILL');
  });

  // The trials, alternately (kill on 1, cut on 2), with normal running between them.
  for (let n = 0; n < TRIALS * 2; n++) {
    const kind = n % 2 === 0 ? 'kill' : 'cut';
    const server = kind === 'kill' ? 1 : 2;
    const trial: Trial = {
      kind,
      server,
      faultAt: Date.now(),
      silentAt: null,
      backAt: null,
      liveAt: null,
      loaded,
    };
    trials.push(trial);
    if (kind === 'kill') {
      const agent = agents[1];
      agent?.child.kill('SIGKILL');
      await agent?.exited;
    } else await proxy.cut('freeze');
    trial.faultAt = Date.now();
    trial.silentAt = await seen(server, 'silent', trial.faultAt);
    trial.backAt = Date.now();
    if (kind === 'kill') start(1);
    else await proxy.restore();
    trial.liveAt = await seen(server, 'live', trial.backAt);
    trial.loaded ||= loaded;
    process.stdout.write(
      `${kind} server ${server}: silent after ${((trial.silentAt - trial.faultAt) / 1000).toFixed(1)} s, live ${((trial.liveAt - trial.backAt) / 1000).toFixed(1)} s after its return${trial.loaded ? ' (loaded)' : ''}\n`,
    );
    await sleep(10_000);
  }
  const remaining = RUN_MS - (Date.now() - began);
  if (remaining > 0) await sleep(remaining);
  stop = true;
  await sampler;
  await loader;

  // A silence outside the server's own trial windows (fault .. shown live) is false.
  const inTrial = (server: number, at: number) =>
    trials.some(
      (t) => t.server === server && at >= t.faultAt && at <= (t.liveAt ?? Number.POSITIVE_INFINITY),
    );
  const loadedFrom = began + loadStart;
  const isLoaded = (at: number) => LOADED_MS > 0 && at >= loadedFrom && at <= loadedFrom + LOADED_MS;
  const falseSilences = samples.flatMap((s) =>
    s.status.flatMap((status, server) =>
      status !== 'live' && !inTrial(server, s.at)
        ? [{ server, status, second: Math.round((s.at - began) / 1000), loaded: isLoaded(s.at) }]
        : [],
    ),
  );
  const secs = (xs: number[]) =>
    summary(
      xs.map((x) => x / 1000),
      1,
    );
  const of = (kind: Trial['kind']) => trials.filter((t) => t.kind === kind);
  const result = {
    date: new Date().toISOString(),
    settings: {
      FLEET_SILENT_SECONDS: defaults.fleet.silentSeconds,
      AGENT_HEARTBEAT_SECONDS: defaults.fleet.agent.heartbeatSeconds,
      FLEET_SILENT_FAIL_SECONDS: defaults.fleet.silentFailSeconds,
      sample_interval_s: 1,
    },
    run_seconds: Math.round((Date.now() - began) / 1000),
    loaded_seconds: LOADED_MS / 1000,
    samples: samples.length,
    samples_loaded: samples.filter((s) => isLoaded(s.at)).length,
    false_silences: falseSilences,
    kill: {
      to_silent_s: secs(of('kill').map((t) => (t.silentAt ?? 0) - t.faultAt)),
      to_live_s: secs(of('kill').map((t) => (t.liveAt ?? 0) - (t.backAt ?? 0))),
    },
    cut: {
      to_silent_s: secs(of('cut').map((t) => (t.silentAt ?? 0) - t.faultAt)),
      to_live_s: secs(of('cut').map((t) => (t.liveAt ?? 0) - (t.backAt ?? 0))),
    },
    trials: trials.map((t) => ({
      kind: t.kind,
      server: t.server,
      at_s: Math.round((t.faultAt - began) / 1000),
      to_silent_s: ((t.silentAt ?? 0) - t.faultAt) / 1000,
      to_live_s: ((t.liveAt ?? 0) - (t.backAt ?? 0)) / 1000,
      loaded: t.loaded,
    })),
    loadavg: loads,
    cores: os.cpus().length,
  };
  const row = (name: string, s: ReturnType<typeof secs>) => `| ${name} | ${s.n} | ${s.p50} | ${s.max} |`;
  const md = `# bench:fleet-silence (issue 30), ${result.date}

${os.cpus().length} cores; load average every 30 s: ${loads.join('; ')}.
Settings (defaults): FLEET_SILENT_SECONDS=${result.settings.FLEET_SILENT_SECONDS} (a server is silent when its
last heartbeat is older), AGENT_HEARTBEAT_SECONDS=${result.settings.AGENT_HEARTBEAT_SECONDS}; the servers list
sampled every 1 s for ${result.run_seconds} s (${result.samples} samples, ${result.samples_loaded} under two busy loops).

**False silences: ${falseSilences.length}** (a server shown not live outside its own trial)${falseSilences.length ? `: ${JSON.stringify(falseSilences)}` : ''}.

| trial (3 agents, one at fault) | n | p50 s | max s |
|---|---|---|---|
${row('agent SIGKILLed -> shown silent', result.kill.to_silent_s)}
${row('agent started again -> shown live', result.kill.to_live_s)}
${row('link cut (proxy frozen) -> shown silent', result.cut.to_silent_s)}
${row('link restored -> shown live', result.cut.to_live_s)}

Per trial: ${result.trials.map((t) => `${t.kind} at ${t.at_s} s: ${t.to_silent_s.toFixed(1)} / ${t.to_live_s.toFixed(1)} s${t.loaded ? ' (loaded)' : ''}`).join('; ')}.
`;
  writeResults('fleet-silence', result, md);
}

await runBench(main);
