// Issue 30: hosting servers on one machine as network namespaces (stack-notes section 8). Each
// namespace gets a veth pair whose host end is a port of one bridge of this run; the bridge holds the
// host's address (x.x.x.1) on a private /24 chosen per run, the namespaces .2, .3, ... Traffic goes
// only to loopback and to these addresses (no route out of a namespace, no forwarding). Root only.
import { execFileSync } from 'node:child_process';
import { after } from 'node:test';

export interface NetnsServer {
  /** The namespace's name (`hpt<pid>s<i>`). */
  name: string;
  /** Its address on the run's /24. */
  address: string;
  /** The veth end on the host (taken down by `cut`). */
  hostLink: string;
}

export interface Netns {
  /** The host's address on the run's /24 (what the namespaces reach the control plane on). */
  hostAddress: string;
  servers: NetnsServer[];
  /** `ip netns exec NAME` as an argv prefix (to run a command inside server `i`). */
  prefix(i: number): string[];
  /** Takes server `i`'s link down (its traffic to and from the host stops) / up again. */
  cut(i: number): void;
  restore(i: number): void;
  /** Kills every process inside the namespaces and removes the links and namespaces (idempotent). */
  remove(): void;
}

const ip = (...args: string[]) => execFileSync('ip', args, { encoding: 'utf8', stdio: 'pipe' });
const tryIp = (...args: string[]) => {
  try {
    return ip(...args);
  } catch {
    return '';
  }
};

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
};

/** Kills every process of the namespace (SIGKILL: what a test leaves there has no state to save). */
function killInside(name: string) {
  for (let round = 0; round < 20; round++) {
    const pids = tryIp('netns', 'pids', name)
      .split('\n')
      .map(Number)
      .filter((pid) => pid > 0);
    if (pids.length === 0) return;
    for (const pid of pids)
      try {
        process.kill(pid, 'SIGKILL');
      } catch {}
    execFileSync('sleep', ['0.1']);
  }
}

function removeNamespace(name: string, hostLink: string) {
  killInside(name);
  tryIp('link', 'del', hostLink);
  tryIp('netns', 'del', name);
}

/** Namespaces and bridges a run that no longer exists left behind (a test killed by SIGKILL). */
function removeOrphans() {
  for (const line of tryIp('netns', 'list').split('\n')) {
    const m = /^hpt(\d+)s(\d+)\b/.exec(line.trim());
    if (m && !alive(Number(m[1]))) removeNamespace(`hpt${m[1]}s${m[2]}`, `hpt${m[1]}h${m[2]}`);
  }
  for (const line of tryIp('-o', 'link', 'show', 'type', 'bridge').split('\n')) {
    const m = /^\d+: (hpt(\d+)br)\b/.exec(line);
    if (m?.[1] && !alive(Number(m[2]))) tryIp('link', 'del', m[1]);
  }
}

/** A /24 of 10.231.0.0/16 no address of this machine is in (the run's pid picks the first to try). */
function freeSubnet(): string {
  const used = tryIp('-o', '-4', 'addr', 'show') + tryIp('-4', 'route', 'show');
  for (let k = 0; k < 256; k++) {
    const third = (process.pid + k) % 250;
    const prefix = `10.231.${third}.`;
    if (!used.includes(prefix)) return prefix;
  }
  throw new Error('no free /24 in 10.231.0.0/16 for the test namespaces');
}

/**
 * Makes `count` namespaces with their links and addresses; removes them in after(), on exit and on
 * SIGINT/SIGTERM, and removes them itself if making them fails half way.
 */
export function makeNamespaces(count: number): Netns {
  if (process.getuid?.() !== 0) throw new Error('network namespaces need root');
  removeOrphans();
  const tag = `hpt${process.pid}`;
  const bridge = `${tag}br`;
  const prefix = freeSubnet();
  const hostAddress = `${prefix}1`;
  const servers: NetnsServer[] = [];
  let removed = false;
  const remove = () => {
    if (removed) return;
    removed = true;
    for (const s of servers) removeNamespace(s.name, s.hostLink);
    tryIp('link', 'del', bridge);
  };
  const onSignal = (signal: NodeJS.Signals) => {
    remove();
    process.kill(process.pid, signal);
  };
  process.once('exit', remove);
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  after(remove);
  try {
    ip('link', 'add', bridge, 'type', 'bridge');
    ip('addr', 'add', `${hostAddress}/24`, 'dev', bridge);
    ip('link', 'set', bridge, 'up');
    for (let i = 0; i < count; i++) {
      const server = { name: `${tag}s${i}`, address: `${prefix}${i + 2}`, hostLink: `${tag}h${i}` };
      const inner = `${tag}n${i}`;
      servers.push(server);
      ip('netns', 'add', server.name);
      ip('link', 'add', server.hostLink, 'type', 'veth', 'peer', 'name', inner);
      ip('link', 'set', inner, 'netns', server.name);
      ip('link', 'set', server.hostLink, 'master', bridge);
      ip('link', 'set', server.hostLink, 'up');
      const inside = (...args: string[]) => ip('-n', server.name, ...args);
      inside('link', 'set', 'lo', 'up');
      inside('addr', 'add', `${server.address}/24`, 'dev', inner);
      inside('link', 'set', inner, 'up');
    }
  } catch (err) {
    remove();
    throw err;
  }
  const at = (i: number) => {
    const server = servers[i];
    if (!server) throw new Error(`no namespace ${i}`);
    return server;
  };
  return {
    hostAddress,
    servers,
    prefix: (i) => ['ip', 'netns', 'exec', at(i).name],
    cut: (i) => ip('link', 'set', at(i).hostLink, 'down'),
    restore: (i) => ip('link', 'set', at(i).hostLink, 'up'),
    remove,
  };
}
