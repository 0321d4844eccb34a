// Issue 30: hosting servers on one machine (test/support/netns.ts), each with its own MariaDB (own
// data directory, listening on 127.0.0.1:3306 of its namespace), its own HOSTING_ROOT and DATA_DIR,
// and a `hostplane agent` started inside the namespace (it starts the server's nginx and PHP-FPM
// there: port 80 of the server's address). What the fleet's test files share (lanes netns, moves).
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after } from 'node:test';
import { makeNamespaces, type Netns } from './netns.js';
import { type Running, runCli } from './process.js';
import { userOf } from './web-tier.js';

export const NETNS_TOOLS = [
  '/usr/sbin/ip',
  '/usr/sbin/mariadbd',
  '/usr/bin/mariadb-install-db',
  '/usr/sbin/nginx',
  '/usr/sbin/php-fpm8.2',
  '/usr/bin/php8.2',
  '/usr/share/wordpress/wp-settings.php',
];

/** MariaDB's options for a test server: small (memory, log), no binary log, no performance schema. */
const MARIADB_SMALL = [
  '--innodb-log-file-size=4M',
  '--innodb-buffer-pool-size=16M',
  '--skip-log-bin',
  '--performance-schema=OFF',
];

export interface HostingServer {
  index: number;
  address: string;
  /** The server's own directories (DATA_DIR of its agent, HOSTING_ROOT, MariaDB's). */
  dataDir: string;
  hostingRoot: string;
  /** The agent running now (null between a kill and a start). */
  agent: Running | null;
  /** Every agent process started for this server, oldest first (their output, for assertions). */
  agents: Running[];
}

/** `hostplane agent` output of every process of a server, for failure messages. */
export const agentOutput = (server: HostingServer) =>
  server.agents.map((a) => a.output()).join('\n--- restart\n');

/**
 * The output of a server's agents once `pattern` (not global) is in it. An agent logs a call's outcome
 * after the control plane took its report, so an operation seen completed does not mean its line has
 * reached this process yet (stop 37's CI failed on that race).
 */
export async function agentLogged(server: HostingServer, pattern: RegExp, ms = 15_000): Promise<string> {
  const end = Date.now() + ms;
  while (!pattern.test(agentOutput(server))) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${pattern} in:\n${agentOutput(server)}`);
    await sleep(50);
  }
  return agentOutput(server);
}

/** Issue 31: each server's agent also runs Hostplane's sshd on this port of the server's addresses. */
export interface NetnsOptions {
  ssh?: { port: number };
  /**
   * InnoDB's buffer pool of each server's MariaDB (default 16M: a test's small tables). A bench of a
   * real-sized site gives MariaDB's own default (128M), what a hosting server runs with at least.
   */
  bufferPool?: string;
}

/** sshd chroots only below directories root owns and nobody else may write (not /tmp). */
const SSH_PARENT = '/var/lib/hostplane-test';

export async function netnsHosting(count: number, options: NetnsOptions = {}) {
  const ns: Netns = makeNamespaces(count);
  if (options.ssh) fs.mkdirSync(SSH_PARENT, { recursive: true, mode: 0o755 });
  // Short under SSH_PARENT: nginx refuses a PHP-FPM socket path over 107 bytes (HOSTING_ROOT/web/run/hp_<32 hex>.sock).
  const work = fs.mkdtempSync(
    path.join(options.ssh ? SSH_PARENT : os.tmpdir(), options.ssh ? 'n-' : 'hostplane-netns-'),
  );
  // MariaDB (user mysql) goes through it to its own directories.
  fs.chmodSync(work, 0o711);
  const installs = new Set<string>();
  const servers: HostingServer[] = [];
  const removing: (() => void)[] = [];
  let removed = false;
  const remove = async () => {
    if (removed) return;
    removed = true;
    for (const server of servers) server.agent?.child.kill('SIGTERM');
    await Promise.all(
      servers.map((s) => (s.agent ? Promise.race([s.agent.exited, sleep(10_000)]) : undefined)),
    );
    // Everything still inside (nginx, PHP-FPM, MariaDB) goes with the namespaces.
    ns.remove();
    // Connections to the agents that went with the namespaces never see a FIN: their ends here go.
    for (const hook of removing) hook();
    // Issue 31: the install names' login entries (decision 185) the servers' gateways made here.
    const passwd = fs.existsSync('/etc/passwd') ? fs.readFileSync('/etc/passwd', 'utf8') : '';
    for (const line of passwd.split('\n')) {
      const [name, , , , comment, home] = line.split(':');
      if (name && comment?.startsWith('hostplane login ') && home?.startsWith(`${work}/`))
        try {
          execFileSync('userdel', ['--force', name], { stdio: 'ignore' });
        } catch {}
    }
    for (const id of installs)
      try {
        execFileSync('userdel', [userOf(id)], { stdio: 'ignore' });
      } catch {}
    fs.rmSync(work, { recursive: true, force: true });
  };
  after(remove);

  // One MariaDB system database, copied to each server (about a second of CPU instead of three).
  const template = path.join(work, 'mariadb-template');
  execFileSync(
    'mariadb-install-db',
    [
      '--no-defaults',
      `--datadir=${template}`,
      '--user=mysql',
      '--auth-root-authentication-method=normal',
      '--skip-test-db',
      ...MARIADB_SMALL,
    ],
    { stdio: 'pipe' },
  );
  const started: Promise<void>[] = [];
  for (let i = 0; i < count; i++) {
    const dir = path.join(work, `server-${i}`);
    const mariadb = path.join(dir, 'mariadb');
    fs.mkdirSync(dir, { mode: 0o711 });
    execFileSync('cp', ['-a', template, path.join(mariadb)]);
    const run = path.join(dir, 'mariadb-run');
    fs.mkdirSync(run);
    execFileSync('chown', ['mysql:mysql', run]);
    const server: HostingServer = {
      index: i,
      address: ns.servers[i]?.address ?? '',
      dataDir: path.join(dir, 'data'),
      hostingRoot: path.join(dir, 'hosting'),
      agent: null,
      agents: [],
    };
    servers.push(server);
    const [cmd, ...prefix] = ns.prefix(i);
    const child = spawn(
      cmd ?? 'ip',
      [
        ...prefix,
        '/usr/sbin/mariadbd',
        '--no-defaults',
        `--datadir=${mariadb}`,
        `--socket=${path.join(run, 'mysqld.sock')}`,
        `--pid-file=${path.join(run, 'mysqld.pid')}`,
        `--log-error=${path.join(run, 'error.log')}`,
        '--bind-address=127.0.0.1',
        '--port=3306',
        '--user=mysql',
        ...MARIADB_SMALL,
        // Later options win: the bench's bigger pool over the small one.
        ...(options.bufferPool ? [`--innodb-buffer-pool-size=${options.bufferPool}`] : []),
      ],
      { stdio: 'ignore', detached: false },
    );
    child.unref();
    started.push(waitForMariaDb(ns, i, path.join(run, 'error.log')));
  }
  await Promise.all(started);

  return {
    ns,
    servers,
    /** The installs a test made (their system users are removed after the file). */
    installs,
    /** Starts server `i`'s agent in its namespace (an enrolment token the first time). */
    startAgent(i: number, controlPlaneUrl: string, token?: string, env: Record<string, string> = {}) {
      const server = servers[i];
      if (!server) throw new Error(`no server ${i}`);
      const agent = runCli(
        ['agent'],
        {
          DATA_DIR: server.dataDir,
          HOSTING_DRIVER: 'local',
          HOSTING_ROOT: server.hostingRoot,
          MARIADB_URL: 'mysql://root@127.0.0.1:3306',
          LOCAL_WEB: 'on',
          HOSTING_HTTP_PORT: '80',
          AGENT_CONTROL_PLANE_URL: controlPlaneUrl,
          AGENT_HEARTBEAT_SECONDS: '1',
          AGENT_RECONCILE_SECONDS: '5',
          ...(options.ssh && { SSH_PORT: String(options.ssh.port) }),
          ...(token && { AGENT_ENROLMENT_TOKEN: token }),
          ...env,
        },
        undefined,
        ns.prefix(i),
      );
      server.agent = agent;
      server.agents.push(agent);
      return agent;
    },
    /** SIGKILLs server `i`'s agent (its nginx, PHP-FPM and MariaDB go on) and waits for its end. */
    async killAgent(i: number) {
      const agent = servers[i]?.agent;
      if (!agent) return;
      agent.child.kill('SIGKILL');
      await agent.exited;
      (servers[i] as HostingServer).agent = null;
    },
    /** Runs SQL in server `i`'s own MariaDB (as root, inside its namespace); its output (`-N`: no headers). */
    sql(i: number, statement: string) {
      const [cmd, ...prefix] = ns.prefix(i);
      return execFileSync(
        cmd ?? 'ip',
        [...prefix, 'mariadb', '--no-defaults', '-h127.0.0.1', '-uroot', '-N', '-e', statement],
        { encoding: 'utf8' },
      );
    },
    /** Runs `hook` once the agents and namespaces are gone (e.g. the control plane's connections closed). */
    onRemove(hook: () => void) {
      removing.push(hook);
    },
    remove,
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function waitForMariaDb(ns: Netns, i: number, log: string) {
  const deadline = Date.now() + 120_000;
  for (;;) {
    const text = fs.existsSync(log) ? fs.readFileSync(log, 'utf8') : '';
    if (text.includes('ready for connections')) return;
    if (/\[ERROR\] Aborting/.test(text) || Date.now() > deadline)
      throw new Error(`MariaDB of server ${i} (${ns.servers[i]?.name}) did not start:\n${text}`);
    await sleep(200);
  }
}
