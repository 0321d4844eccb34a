import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { configPath, installSlug, pathsOf, systemUser } from './names.js';
import { output, run, TOOL_ENV } from './run.js';
import { livePid, signalDaemon, startDaemon } from './supervise.js';

/**
 * Issue 31: Hostplane's own OpenSSH server (docs/architecture.md "SSH and SFTP to installs";
 * decisions #161-#165). Debian's sshd runs with a configuration of its own under HOSTING_ROOT/sshd
 * (never the system's sshd or port 22): keys only, from the control plane at each login (an
 * AuthorizedKeysCommand asking Hostplane over a unix socket only root and `hpsshauth` can reach), each
 * install's user chrooted to its install directory with SFTP only, nothing forwarded. Started like
 * nginx by its pid file, so it outlives Hostplane; its log names which key opened which session.
 */

/** sshd's AuthorizedKeysCommandUser: the only account besides root that may ask for keys. */
export const KEYS_USER = 'hpsshauth';
/** An install's system user (names.ts `systemUser`): a login name sshd admits (decision 162). */
export const SYSTEM_LOGIN = /^hp[0-9a-f]{30}$/;
/** An install's name (I1): the login name users type (decision 185), a second passwd entry. */
export const NAME_LOGIN = /^[a-z][a-z0-9]{2,13}$/;
/** Either login shape (nothing else reaches the key lookup, a path or a command line). */
export const isLogin = (login: string) => SYSTEM_LOGIN.test(login) || NAME_LOGIN.test(login);
/** What every SFTP-only session runs: SFTP in the install's document root, files 0640, directories 0750. */
export const sftpCommand = (publicDir: string) => `internal-sftp -d ${configPath(publicDir)} -u 027`;
/** The SFTP command inside the install's chroot (shells off). */
export const SFTP_COMMAND = sftpCommand('/public');
/**
 * Names never given to an install's login entry, even when free now: system accounts Debian packages
 * may add later (`adduser --system` would reuse an existing entry, and its daemon would run as the
 * install's uid). A name taken by any account is never used either (decision 185).
 */
export const RESERVED_LOGINS = new Set(
  (
    'root daemon bin sys sync games man lp mail news uucp proxy backup list irc gnats nobody sshd ' +
    'messagebus mysql mariadb postgres redis memcache memcached nginx apache apache2 www wwwdata ' +
    'postfix exim dovecot bind named ntp chrony syslog tss uuidd tcpdump avahi polkitd systemd ' +
    'admin administrator operator ftp git svn docker lxd ubuntu debian hostplane hpsshauth dnsmasq ' +
    'rpc statd sddm usbmux pulse colord geoclue rtkit saned landscape pollinate fwupd clamav ' +
    'opendkim amavis spamd elasticsearch mongodb rabbitmq jenkins prometheus grafana node nodejs'
  ).split(' '),
);
/** The comment (GECOS) of a login entry Hostplane made: only such entries are ever changed or removed. */
const MARKER = 'hostplane login ';
export const loginMarker = (installId: string) => `${MARKER}${installSlug(installId)}`;
const SHELL = '/bin/bash';
const NOLOGIN = '/usr/sbin/nologin';
const SSHD = '/usr/sbin/sshd';
const CURL = '/usr/bin/curl';
const SH = '/bin/sh';

export interface SshdConfig {
  /** SSH_PORT. */
  port: number;
  /** SSH_ADDRESS. */
  address: string;
  /**
   * SSH_SHELLS=on (decision 186): owners and full users get a shell and `ssh <install> cmd` as the
   * install's user, unchrooted (the uid is the boundary); everyone else SFTP only. Off: SFTP only,
   * chrooted to the install.
   */
  shells?: boolean;
}

/** Where the SSH server keeps its configuration, key, pid file, log, key socket and chroot links. */
export function sshdPaths(hostingRoot: string) {
  const root = configPath(path.join(hostingRoot, 'sshd'));
  const auth = path.join(root, 'auth');
  return {
    root,
    config: path.join(root, 'sshd_config'),
    hostKey: path.join(root, 'host_ed25519_key'),
    pid: path.join(root, 'sshd.pid'),
    log: path.join(root, 'sshd.log'),
    /** 0750 root:hpsshauth: whoever may enter may ask for keys. */
    auth,
    socket: path.join(auth, 'keys.sock'),
    /** `<login>` -> the install's directory (sshd's ChrootDirectory is `chroot/%u`). */
    chroot: path.join(root, 'chroot'),
  };
}

export type SshdPaths = ReturnType<typeof sshdPaths>;

/** The sshd_config Hostplane writes (every line that matters, nothing left to the system's defaults). */
export function sshdConfigText(paths: SshdPaths, config: SshdConfig): string {
  // The system's shell only starts curl (exec) with the lookup's fields as its own arguments (quoted,
  // never parsed) and $PPID: the connection's sshd process, which runs every lookup of that connection,
  // so the signature's lookup can reuse the answer its probe just got (decision 203; OpenSSH 9.2 has
  // no token naming the connection for this command).
  const script = [
    'exec',
    CURL,
    '-q',
    '-sf',
    '--max-time 5',
    `--unix-socket ${paths.socket}`,
    '--data-urlencode "user=$1"',
    '--data-urlencode "uid=$2"',
    '--data-urlencode "type=$3"',
    '--data-urlencode "key=$4"',
    '--data-urlencode "monitor=$PPID"',
    'http://hostplane/ssh/keys',
  ].join(' ');
  const keyCommand = `${SH} -c '${script}' hpkeys %u %U %t %k`;
  return `# Written by Hostplane (issue 31) at each start; changes here are overwritten.
Port ${config.port}
ListenAddress ${config.address}
HostKey ${paths.hostKey}
PidFile ${paths.pid}
LogLevel VERBOSE
UsePAM yes
PermitRootLogin no
DenyUsers root ${KEYS_USER}
AuthenticationMethods publickey
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
HostbasedAuthentication no
AuthorizedKeysFile none
AuthorizedKeysCommand ${keyCommand}
AuthorizedKeysCommandUser ${KEYS_USER}
StrictModes yes
DisableForwarding yes
AllowTcpForwarding no
AllowStreamLocalForwarding no
AllowAgentForwarding no
X11Forwarding no
PermitTunnel no
GatewayPorts no
PermitTTY ${config.shells ? 'yes' : 'no'}
PermitUserEnvironment no
PermitUserRC no
PrintMotd no
PrintLastLog no
MaxAuthTries 6
MaxStartups 50:30:200
LoginGraceTime 30
ClientAliveInterval 30
ClientAliveCountMax 4
${
  config.shells
    ? `# SSH_SHELLS=on: no chroot (a shell needs the system's programs); each key's options decide
# (restrict,pty for owners and full users; restrict,command="internal-sftp ..." for the others).
# SFTP starts in the document root: the home is the install's private/ directory, its sibling.
Subsystem sftp internal-sftp -d %d/../public -u 027`
    : `ChrootDirectory ${paths.chroot}/%u
ForceCommand ${SFTP_COMMAND}
Subsystem sftp ${SFTP_COMMAND}`
}
`;
}

/** A live session of our sshd: the process that serves it (runs as the install's user). */
export interface SshSession {
  pid: number;
  login: string;
}

async function readText(file: string): Promise<string | null> {
  return fs.readFile(file, 'utf8').catch(() => null);
}

/** The parent pid in /proc/PID/stat (after the parenthesised name, which may hold spaces). */
async function parentOf(pid: number): Promise<number | null> {
  const stat = await readText(`/proc/${pid}/stat`);
  if (!stat) return null;
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ppid = Number(fields[1]);
  return Number.isInteger(ppid) ? ppid : null;
}

/** The login of a session process by its title (`sshd: <login>@notty`, `@pts/N`), or null. */
async function sessionLogin(pid: number): Promise<string | null> {
  const cmdline = await readText(`/proc/${pid}/cmdline`);
  const match = /^sshd: ([a-z][a-z0-9]{1,31})@/.exec(cmdline?.replace(/\0/g, ' ') ?? '');
  const login = match?.[1] ?? null;
  return login && isLogin(login) ? login : null;
}

/**
 * Decision 203: a process named by its pid and its start time (field 22 of /proc/PID/stat, in clock
 * ticks since boot), so a pid used again by another process names another connection; null when gone.
 */
export async function processIdentity(pid: number): Promise<string | null> {
  if (!Number.isInteger(pid) || pid <= 1) return null;
  const stat = await readText(`/proc/${pid}/stat`);
  if (!stat) return null;
  const start = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  return start && /^[0-9]+$/.test(start) ? `${pid}:${start}` : null;
}

/** Every process's parent (from /proc). */
async function processParents(): Promise<Map<number, number>> {
  const parents = new Map<number, number>();
  for (const name of await fs.readdir('/proc')) {
    const pid = Number(name);
    if (!Number.isInteger(pid) || pid <= 1) continue;
    const ppid = await parentOf(pid);
    if (ppid !== null) parents.set(pid, ppid);
  }
  return parents;
}

/** One line of /etc/passwd. */
export interface PasswdEntry {
  name: string;
  uid: number;
  gid: number;
  comment: string;
  home: string;
  shell: string;
}

/** The system's accounts (read as root from /etc/passwd: the file useradd writes). */
export async function readPasswd(file = '/etc/passwd'): Promise<Map<string, PasswdEntry>> {
  const entries = new Map<string, PasswdEntry>();
  for (const line of ((await readText(file)) ?? '').split('\n')) {
    const f = line.split(':');
    if (f.length !== 7 || !f[0]) continue;
    entries.set(f[0], {
      name: f[0],
      uid: Number(f[2]),
      gid: Number(f[3]),
      comment: f[4] ?? '',
      home: f[5] ?? '',
      shell: f[6] ?? '',
    });
  }
  return entries;
}

export function createSshd(hostingRoot: string, config: SshdConfig) {
  const paths = sshdPaths(hostingRoot);
  const installsDir = path.join(hostingRoot, 'installs');

  /** sshd's ChrootDirectory rule: every component root-owned and writable by nobody else. */
  async function chrootProblem(): Promise<string | null> {
    let dir = installsDir;
    for (;;) {
      const st = await fs.stat(dir).catch(() => null);
      if (st && (st.uid !== 0 || (st.mode & 0o022) !== 0))
        return `${dir} is ${st.uid === 0 ? `mode ${(st.mode & 0o7777).toString(8)}` : `owned by uid ${st.uid}`}: sshd chroots an install only when every directory above it is root's and writable by nobody else`;
      const parent = path.dirname(dir);
      if (parent === dir) return null;
      dir = parent;
    }
  }

  async function liveInstallIds(): Promise<string[]> {
    const hex = (await fs.readdir(installsDir).catch(() => [] as string[]))
      .filter((n) => /^hp_[0-9a-f]{32}$/.test(n))
      .map((n) => n.slice(3));
    return hex.map(
      (h) => `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`,
    );
  }

  /** `userdel` of a login entry of ours (never the install's own user: another name, same uid). */
  async function removeLogin(name: string, signal: AbortSignal) {
    await run('userdel', ['--force', name], { signal, env: TOOL_ENV }).catch(async (err: unknown) => {
      if ((await readPasswd()).has(name)) throw err;
    });
  }

  async function ensureKeysUser(signal: AbortSignal) {
    const exists = () =>
      output('id', ['-u', KEYS_USER], signal).then(
        () => true,
        () => false,
      );
    if (await exists()) return;
    try {
      await run(
        'useradd',
        [
          '--system',
          '--user-group',
          '--no-create-home',
          '--home-dir',
          '/nonexistent',
          '--shell',
          '/usr/sbin/nologin',
          KEYS_USER,
        ],
        { signal, env: TOOL_ENV },
      );
    } catch (err) {
      // Another Hostplane on this machine made it meanwhile (useradd: already exists).
      if (!(await exists())) throw err;
    }
  }

  async function writeIfChanged(file: string, text: string, mode: number): Promise<boolean> {
    if ((await readText(file)) === text) return false;
    const temp = `${file}.tmp`;
    await fs.writeFile(temp, text, { mode });
    await fs.rename(temp, file);
    return true;
  }

  return {
    paths,
    chrootProblem,
    /** SSH_SHELLS=on: sessions are not chrooted; owners' and full users' keys get a shell. */
    shells: Boolean(config.shells),

    /**
     * The options of an install's key line (decision 186): `restrict` always (no forwarding of any
     * kind, no ~/.ssh/rc); with shells on, a pty for a shell key, else SFTP forced in the document root.
     */
    keyOptions(installId: string, shell: boolean): string {
      if (!config.shells) return `restrict,command="${SFTP_COMMAND}"`;
      if (shell) return 'restrict,pty';
      return `restrict,command="${sftpCommand(pathsOf(hostingRoot, installId).public)}"`;
    },

    /**
     * Writes the configuration and the host key (once), and starts sshd when its pid file names no
     * live process; a running one is sent SIGHUP when its configuration changed. Safe to run again.
     */
    async start(signal: AbortSignal = new AbortController().signal): Promise<void> {
      const problem = await chrootProblem();
      if (problem) throw new Error(`SSH_PORT: ${problem}`);
      await ensureKeysUser(signal);
      const gid = Number((await output('id', ['-g', KEYS_USER], signal)).trim());
      await fs.mkdir(paths.root, { recursive: true, mode: 0o711 });
      await fs.chmod(paths.root, 0o711);
      await fs.mkdir(paths.chroot, { recursive: true, mode: 0o711 });
      await fs.chmod(paths.chroot, 0o711);
      await fs.mkdir(paths.auth, { recursive: true, mode: 0o750 });
      await fs.chown(paths.auth, 0, gid);
      await fs.chmod(paths.auth, 0o750);
      // sshd's privilege separation directory (the system's; sshd refuses to start without it).
      await fs.mkdir('/run/sshd', { recursive: true, mode: 0o755 });
      if (!existsSync(paths.hostKey))
        await run('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'hostplane', '-f', paths.hostKey], {
          signal,
          env: TOOL_ENV,
        });
      const changed = await writeIfChanged(paths.config, sshdConfigText(paths, config), 0o600);
      await run(SSHD, ['-t', '-f', paths.config], { signal, env: TOOL_ENV });
      if (await livePid(paths.pid)) {
        if (changed) await signalDaemon(paths.pid, 'SIGHUP');
        return;
      }
      await startDaemon(SSHD, ['-f', paths.config, '-E', paths.log], `${paths.log}.start`, paths.pid);
    },

    /** The live sshd's pid, or null. */
    running: () => livePid(paths.pid),

    /** Stops sshd (its open sessions end with it). */
    stop: () => signalDaemon(paths.pid, 'SIGTERM'),

    /**
     * Points `chroot/<login>` at the install's directory (root-owned 0711), before a login of it is
     * allowed: sshd's ChrootDirectory takes the login name, the directory is named from the whole id.
     */
    async ensureChroot(installId: string, login: string = systemUser(installId)): Promise<void> {
      if (!isLogin(login)) throw new Error(`not a login: ${JSON.stringify(login)}`);
      const link = path.join(paths.chroot, login);
      const target = pathsOf(hostingRoot, installId).root;
      if ((await fs.readlink(link).catch(() => null)) === target) return;
      const temp = `${link}.${process.pid}.tmp`;
      await fs.rm(temp, { force: true });
      await fs.symlink(target, temp);
      await fs.rename(temp, link);
    },

    /**
     * Removes the links of logins that no install directory answers any more (`names`: the install
     * name of each live install id; a name link is kept only for its install).
     */
    async pruneChroots(names: Map<string, string> = new Map()): Promise<void> {
      const ids = await liveInstallIds();
      const live = new Set(ids.map(systemUser));
      for (const id of ids) {
        const name = names.get(id);
        if (name) live.add(name);
      }
      for (const name of await fs.readdir(paths.chroot).catch(() => [] as string[]))
        if (isLogin(name) && !live.has(name)) await fs.rm(path.join(paths.chroot, name), { force: true });
    },

    /** The ids of the installs whose directory exists here (`hp_<32 hex>` under HOSTING_ROOT/installs). */
    liveInstallIds,

    /**
     * Decision 185: each install's name is a login of its own, a second passwd entry with the install
     * user's uid and group (`useradd --non-unique`), its private directory as home, a shell when
     * SSH_SHELLS=on, and the comment `hostplane login hp_<hex>` that marks it as Hostplane's. `wanted`
     * maps each live install id to its name. A name any other account holds, or a reserved one, gets
     * no entry (that install logs in as `hp<30 hex>`); entries of ours no install wants are removed.
     * Answers the names that log in now.
     */
    async syncLogins(wanted: Map<string, string>, signal: AbortSignal): Promise<Set<string>> {
      const passwd = await readPasswd();
      const shell = config.shells ? SHELL : NOLOGIN;
      const ready = new Set<string>();
      const wantedBySlug = new Map([...wanted].map(([id, name]) => [installSlug(id), name]));
      for (const [installId, name] of wanted) {
        if (!NAME_LOGIN.test(name) || RESERVED_LOGINS.has(name)) continue;
        const owner = passwd.get(systemUser(installId));
        if (!owner || owner.uid === 0) continue;
        const marker = loginMarker(installId);
        const home = pathsOf(hostingRoot, installId).private;
        const entry = passwd.get(name);
        if (entry && (entry.comment !== marker || entry.uid !== owner.uid || entry.gid !== owner.gid))
          continue;
        if (!entry)
          await run(
            'useradd',
            [
              '--non-unique',
              '--uid',
              String(owner.uid),
              '--gid',
              String(owner.gid),
              '--no-user-group',
              '--no-create-home',
              '--home-dir',
              home,
              '--shell',
              shell,
              '--comment',
              marker,
              name,
            ],
            { signal, env: TOOL_ENV },
          );
        else if (entry.shell !== shell || entry.home !== home)
          await run('usermod', ['--home', home, '--shell', shell, name], { signal, env: TOOL_ENV });
        ready.add(name);
      }
      for (const entry of passwd.values()) {
        if (!entry.comment.startsWith(MARKER) || !NAME_LOGIN.test(entry.name) || entry.uid === 0) continue;
        // Only this HOSTING_ROOT's entries (their home is one of its installs): another Hostplane's
        // on the same machine (a test file, a second instance) is that one's to keep.
        if (!entry.home.startsWith(`${installsDir}/`)) continue;
        if (wantedBySlug.get(entry.comment.slice(MARKER.length)) !== entry.name)
          await removeLogin(entry.name, signal);
      }
      return ready;
    },

    /** The sessions our sshd serves now: its connections' post-authentication children. */
    async sessions(): Promise<SshSession[]> {
      const master = await livePid(paths.pid);
      if (!master) return [];
      const parents = await processParents();
      const monitors = new Set([...parents].filter(([, ppid]) => ppid === master).map(([pid]) => pid));
      const sessions: SshSession[] = [];
      for (const [pid, ppid] of parents) {
        if (!monitors.has(ppid)) continue;
        const login = await sessionLogin(pid);
        if (login) sessions.push({ pid, login });
      }
      return sessions;
    },

    /** Ends a session (SIGKILL of its process), checked again to be one of our sshd's sessions. */
    async endSession(session: SshSession): Promise<boolean> {
      const master = await livePid(paths.pid);
      const monitor = await parentOf(session.pid);
      if (!master || monitor === null || (await parentOf(monitor)) !== master) return false;
      if ((await sessionLogin(session.pid)) !== session.login) return false;
      // A shell's or a command's processes first (children of the session process, and theirs), then
      // the session: a command would outlive its session otherwise. (One that left the tree with a
      // double fork is the install's own process, like a PHP request's, and ends with the install.)
      const parents = await processParents();
      const tree: number[] = [];
      let level = [session.pid];
      while (level.length > 0 && tree.length < 10_000) {
        const next = [...parents].filter(([, ppid]) => level.includes(ppid)).map(([pid]) => pid);
        tree.push(...next);
        level = next;
      }
      for (const pid of tree.reverse()) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {}
      }
      try {
        process.kill(session.pid, 'SIGKILL');
        return true;
      } catch {
        return false;
      }
    },

    /** For `hostplane doctor`: what stops SSH from working here, or null. */
    async problem(): Promise<string | null> {
      if (!existsSync(SSHD)) return `${SSHD} is missing (apt-get install openssh-server)`;
      if (!existsSync(CURL)) return `${CURL} is missing (apt-get install curl)`;
      const chroot = await chrootProblem();
      if (chroot) return chroot;
      if (!(await livePid(paths.pid))) return `sshd is not running (no live pid in ${paths.pid})`;
      return null;
    },
  };
}

export type Sshd = ReturnType<typeof createSshd>;

/** The install id's first 30 hex digits (the login) as the range of install ids it can name. */
export function installIdRange(login: string): { low: string; high: string } | null {
  if (!SYSTEM_LOGIN.test(login)) return null;
  const hex = login.slice(2);
  const uuid = (h: string) =>
    `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
  return { low: uuid(`${hex}00`), high: uuid(`${hex}ff`) };
}

/** `SHA256:<unpadded base64>` of a key blob, as sshd logs it and ssh-keygen -l prints it. */
export function fingerprintOf(blobBase64: string): string {
  const digest = createHash('sha256').update(Buffer.from(blobBase64, 'base64')).digest('base64');
  return `SHA256:${digest.replace(/=+$/, '')}`;
}

/** What sshd's log (LogLevel VERBOSE) says about a login, line by line. */
export type SshdLogEvent =
  | { kind: 'accepted'; login: string; address: string; fingerprint: string }
  | { kind: 'refused'; login: string; address: string; fingerprint: string | null }
  | { kind: 'session'; pid: number };

const ACCEPTED = /^Accepted publickey for (\S+) from (\S+) port \d+ ssh2: \S+ (SHA256:[A-Za-z0-9+/]+)\s*$/;
const FAILED =
  /^Failed publickey for (?:invalid user )?(\S+) from (\S+) port \d+ ssh2: \S+ (SHA256:[A-Za-z0-9+/]+)\s*$/;
const INVALID = /^Invalid user (\S*) from (\S+) port \d+\s*$/;
const NOT_ALLOWED = /^User (\S+) from (\S+) not allowed because /;
const CHILD = /^User child is on pid (\d+)\s*$/;

export function parseSshdLine(line: string): SshdLogEvent | null {
  let m = ACCEPTED.exec(line);
  if (m)
    return { kind: 'accepted', login: m[1] as string, address: m[2] as string, fingerprint: m[3] as string };
  m = FAILED.exec(line);
  if (m)
    return { kind: 'refused', login: m[1] as string, address: m[2] as string, fingerprint: m[3] as string };
  m = INVALID.exec(line);
  if (m)
    return {
      kind: 'refused',
      login: (m[1] as string).slice(0, 64),
      address: m[2] as string,
      fingerprint: null,
    };
  m = NOT_ALLOWED.exec(line);
  if (m)
    return {
      kind: 'refused',
      login: (m[1] as string).slice(0, 64),
      address: m[2] as string,
      fingerprint: null,
    };
  m = CHILD.exec(line);
  if (m) return { kind: 'session', pid: Number(m[1]) };
  return null;
}

/**
 * Reads what sshd appended to its log since the last call (from the start when `fromStart`, else
 * from the end at the first call); a log that shrank (truncated) is read again from its start.
 * With `rotateAt` (bytes), a log read to its end that is larger is copied to `<log>.1` (the previous
 * copy replaced) and truncated in place: sshd and its sessions' monitors append to it (`-E` opens it
 * O_APPEND), so they go on writing at its new end and no process needs a signal.
 */
export function createLogFollower(file: string, fromStart: boolean, rotateAt: number | null = null) {
  let offset: number | null = fromStart ? 0 : null;
  let rest = '';
  return async function read(): Promise<SshdLogEvent[]> {
    const handle = await fs.open(file, rotateAt === null ? 'r' : 'r+').catch(() => null);
    if (!handle) return [];
    try {
      let { size } = await handle.stat();
      if (offset === null) offset = size;
      if (size < offset) {
        offset = 0;
        rest = '';
      }
      const events: SshdLogEvent[] = [];
      for (;;) {
        while (offset < size) {
          const chunk = Buffer.alloc(Math.min(size - offset, 1 << 20));
          const { bytesRead } = await handle.read(chunk, 0, chunk.length, offset);
          if (bytesRead === 0) break;
          offset += bytesRead;
          const lines = (rest + chunk.subarray(0, bytesRead).toString('utf8')).split('\n');
          rest = (lines.pop() ?? '').slice(-4096);
          for (const line of lines) {
            const event = parseSshdLine(line.replace(/\r$/, ''));
            if (event) events.push(event);
          }
        }
        if (rotateAt === null || offset < rotateAt || rest !== '') break;
        await fs.copyFile(file, `${file}.1.tmp`);
        await fs.rename(`${file}.1.tmp`, `${file}.1`);
        // Only what was read is dropped: a line appended meanwhile is read first, then the check again.
        size = (await handle.stat()).size;
        if (size > offset) continue;
        await handle.truncate(0);
        offset = 0;
        break;
      }
      return events;
    } finally {
      await handle.close();
    }
  };
}

/**
 * `hostplane doctor` with SSH_PORT (doctor.ts adds these): the programs the SSH server runs, each with
 * its Debian package, and sshd's chroot rule for HOSTING_ROOT (checked before anything starts).
 */
export async function sshdDoctorChecks(
  hostingRoot: string,
  probe: { output(command: string, args: string[]): Promise<string> },
): Promise<{ name: string; ok: boolean; detail: string; debianPackage: string | null }[]> {
  const program = async (name: string, debianPackage: string, command: string, args: string[]) => {
    try {
      const out = await probe.output(command, args);
      return { name, ok: true, detail: out.trim().split('\n')[0]?.slice(0, 120) ?? '', debianPackage };
    } catch (err) {
      return { name, ok: false, detail: `${command}: ${(err as Error).message}`, debianPackage };
    }
  };
  const chroot = await createSshd(hostingRoot, { port: 1, address: '127.0.0.1' }).chrootProblem();
  return Promise.all([
    program('sshd (SSH_PORT)', 'openssh-server', SSHD, ['-V']),
    program('ssh-keygen (the SSH host key; openssh-client)', 'openssh-client', 'ssh', ['-V']),
    program('curl (the SSH key lookup)', 'curl', CURL, ['--version']),
    {
      name: 'HOSTING_ROOT chroot rule (SSH_PORT)',
      ok: chroot === null,
      detail: chroot ?? 'every directory above the installs is root’s and writable by nobody else',
      debianPackage: null,
    },
  ]);
}

/**
 * `hostplane doctor` (not at a start, which writes and starts all of it): whether Hostplane's sshd
 * runs from its pid file, whether its written configuration passes `sshd -t`, and whether SSH_PORT
 * answers with its host key (another server on the port would answer with another). Warnings only,
 * except a configuration sshd refuses or a port held by another server.
 */
export async function sshdRuntimeChecks(
  hostingRoot: string,
  config: SshdConfig,
  probe: {
    output(command: string, args: string[]): Promise<string>;
    exists(path: string): boolean;
    readText(path: string): string | null;
  },
): Promise<{ name: string; ok: boolean; detail: string; debianPackage: string | null; warning?: boolean }[]> {
  const paths = sshdPaths(hostingRoot);
  const checks: {
    name: string;
    ok: boolean;
    detail: string;
    debianPackage: string | null;
    warning?: boolean;
  }[] = [];
  const name = `sshd configuration (${paths.config})`;
  if (!probe.exists(paths.config))
    checks.push({
      name,
      ok: false,
      warning: true,
      detail: 'not written yet (hostplane serve writes it)',
      debianPackage: null,
    });
  else
    checks.push(
      await probe.output(SSHD, ['-t', '-f', paths.config]).then(
        () => ({ name, ok: true, detail: 'sshd -t: valid', debianPackage: null }),
        (err: Error) => ({
          name,
          ok: false,
          detail: `sshd -t: ${err.message.slice(0, 300)}`,
          debianPackage: null,
        }),
      ),
    );
  const pid = Number(probe.readText(paths.pid)?.trim());
  const cmdline = pid > 1 ? probe.readText(`/proc/${pid}/cmdline`)?.split('\0') : undefined;
  const running = Boolean(cmdline?.[0] === SSHD && cmdline.includes(paths.config));
  checks.push(
    running
      ? { name: 'sshd running (SSH_PORT)', ok: true, detail: `pid ${pid}`, debianPackage: null }
      : {
          name: 'sshd running (SSH_PORT)',
          ok: false,
          warning: true,
          detail: `no live sshd of ours in ${paths.pid} (hostplane serve starts it; it outlives Hostplane)`,
          debianPackage: null,
        },
  );
  const address =
    config.address === '0.0.0.0' ? '127.0.0.1' : config.address === '::' ? '::1' : config.address;
  const ours = probe.readText(`${paths.hostKey}.pub`)?.trim().split(/\s+/)[1];
  const port = `port ${config.address}:${config.port} (SSH_PORT)`;
  const scanned = await probe
    .output('ssh-keyscan', ['-T', '3', '-t', 'ed25519', '-p', String(config.port), address])
    .catch(() => '');
  const key = scanned
    .split('\n')
    .find((l) => l.includes('ssh-ed25519'))
    ?.trim()
    .split(/\s+/)[2];
  if (!key)
    checks.push({
      name: port,
      ok: false,
      warning: !running,
      detail: running ? 'sshd runs but nothing answers SSH on the port' : 'nothing answers SSH on the port',
      debianPackage: null,
    });
  else if (ours && key === ours)
    checks.push({ name: port, ok: true, detail: 'answers with Hostplane’s host key', debianPackage: null });
  else
    checks.push({
      name: port,
      ok: false,
      detail: 'another SSH server answers on the port (not Hostplane’s host key): choose another SSH_PORT',
      debianPackage: null,
    });
  return checks;
}
