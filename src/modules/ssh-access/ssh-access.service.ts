import { randomUUID } from 'node:crypto';
import fs from 'node:fs/promises';
import http from 'node:http';
import { isRole, type Membership, seesInstall } from '../../auth/access.js';
import type { Clock } from '../../clock.js';
import type { Db } from '../../db/client.js';
import { systemUser } from '../../drivers/local/names.js';
import {
  createLogFollower,
  fingerprintOf,
  installIdRange,
  isLogin,
  KEYS_USER,
  processIdentity,
  readPasswd,
  type Sshd,
  type SshdLogEvent,
  SYSTEM_LOGIN,
} from '../../drivers/local/sshd.js';
import { Errors } from '../../errors.js';
import type { AuditService } from '../audit/audit.service.js';
import * as repo from './ssh-access.repo.js';

/** What the SSH gateway counted (hostplane_ssh_* in /metrics). */
export interface SshCounts {
  accepted: number;
  refused: number;
  /** Sessions ended because their key no longer opens their install. */
  ended: number;
  /** Key lookups sshd made (each login asks once for the probe and once for the signature). */
  lookups: number;
  /** Of them, signature lookups answered with the line the connection's probe got (decision 203). */
  reused: number;
  lookupErrors: number;
}

/** Key types the platform registers (K1), as sshd passes them (%t). */
const KEY_TYPE = /^(ssh-ed25519|ecdsa-sha2-nistp(256|384|521)|ssh-rsa)$/;
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;
const MAX_BODY = 16_384;
/** A probe's answer serves its connection's signature lookup this long at most, once. */
const REUSE_MS = 2000;
const MAX_ANSWERED = 1000;
const REAP_EVERY_MS = 2000;
/** sshd's log is copied to sshd.log.1 and emptied past this size (about 40,000 logins). */
const LOG_ROTATE_BYTES = 16 << 20;

export type Decision = {
  allowed: boolean;
  installId: string | null;
  installName: string | null;
  accountId: string | null;
  userId: string | null;
  /** Owner or full user (a shell where SSH_SHELLS=on); partial users get SFTP only. */
  fullAccess: boolean;
};
/** The most installs one round of the login sync handles (decision 185). */
const MAX_LOGINS = 50_000;

/** The answer for a login that names no install, or a key that opens nothing known. */
export const NO_DECISION: Readonly<Decision> = Object.freeze({
  allowed: false,
  installId: null,
  installName: null,
  accountId: null,
  userId: null,
  fullAccess: false,
});

/** Whether `fingerprint` (and, at a key lookup, its public key) opens the install `login` names now. */
export async function decideLogin(
  db: Db,
  login: string,
  fingerprint: string | null,
  publicKey?: string,
): Promise<Decision> {
  const which = SYSTEM_LOGIN.test(login) ? installIdRange(login) : isLogin(login) ? { name: login } : null;
  if (!which) return NO_DECISION;
  const rows = await repo.loginFacts(db, which, fingerprint);
  const [row] = rows;
  if (!row || rows.length > 1) return NO_DECISION;
  const facts: Decision = {
    allowed: false,
    installId: row.install_id,
    installName: row.install_name,
    accountId: row.account_id,
    userId: row.key_user_id,
    fullAccess: false,
  };
  if (row.status !== 'active' || !row.key_user_id || !row.roles || !isRole(row.roles)) return facts;
  // Issue 30 (decision #211): frozen by its move's final sync: refused, and open sessions are ended
  // (the reaper asks again), so nothing is written after the last backup; the next login is the target's.
  if (row.frozen) return facts;
  if (publicKey !== undefined && row.public_key !== publicKey) return facts;
  const membership: Membership = {
    accountId: row.account_id,
    roles: row.roles,
    installIds: row.roles.startsWith('partial') ? new Set(row.in_scope ? [row.install_id] : []) : null,
  };
  return {
    ...facts,
    allowed: seesInstall(membership, row.install_id),
    fullAccess: membership.installIds === null,
  };
}

/** A login sshd logged (accepted or refused), as the gateway records it. */
export type SshLogin = Extract<SshdLogEvent, { kind: 'accepted' | 'refused' }>;

/**
 * Who answers the gateway (issue 31 with several servers, decision 200): the control plane's own
 * database where the driver runs beside it (`databaseAuthority`), the control plane through the
 * server's agent credential on a hosting server (fleet/agent-ssh.ts). Every answer that cannot be had
 * is an error, and an error refuses the login (fails closed).
 */
export interface SshAuthority {
  decide(login: string, fingerprint: string | null, publicKey?: string): Promise<Decision>;
  /** The names of the installs with these ids (the logins sshd admits, decision 185). */
  installNames(ids: string[]): Promise<Map<string, string>>;
  /** The login's audit event. */
  record(event: SshLogin): Promise<void>;
}

/** The gateway's answers from the control plane's database (the driver runs in its process). */
export function databaseAuthority({
  db,
  clock,
  audit,
}: {
  db: Db;
  clock: Clock;
  audit: AuditService;
}): SshAuthority {
  return {
    decide: (login, fingerprint, publicKey) => decideLogin(db, login, fingerprint, publicKey),
    installNames: (ids) => repo.installNames(db, ids),
    record: (event) => recordLogin({ db, clock, audit }, event),
  };
}

/** The audit event of a login sshd logged (from a gateway beside the control plane, or an agent's). */
export async function recordLogin(
  { db, clock, audit }: { db: Db; clock: Clock; audit: AuditService },
  event: SshLogin,
  server: { id: string; hosts: (installId: string) => Promise<boolean> } | null = null,
): Promise<void> {
  const accepted = event.kind === 'accepted';
  let facts = isLogin(event.login) ? await decideLogin(db, event.login, event.fingerprint) : null;
  // A hosting server's report names only its own installs: another's login is recorded without it.
  if (server && facts?.installId && !(await server.hosts(facts.installId))) facts = null;
  const userId = facts?.userId ?? (event.fingerprint ? await repo.keyOwner(db, event.fingerprint) : null);
  await audit.record({
    occurred_at: clock.now(),
    account_id: facts?.accountId ?? null,
    actor_type: 'user',
    actor_user_id: userId,
    credential_id: null,
    ip: event.address,
    request_id: `ssh-${randomUUID()}`,
    action: 'ssh.login',
    method: 'SSH',
    path: `ssh://${event.login}`,
    resource_type: 'install',
    resource_id: facts?.installId ?? null,
    status: accepted ? 200 : 403,
    before: null,
    after: {
      result: accepted ? 'accepted' : 'refused',
      login: event.login,
      install_name: facts?.installName ?? null,
      fingerprint: event.fingerprint,
      ...(server && { server_id: server.id }),
    },
  });
}

/**
 * Issue 31 with several servers (decision 200): what a hosting server's agent may ask about SSH, with
 * its own credential. It may ask only about the installs placed on its server (403 for any other, and
 * for a login that names none), and it hears only what its gateway needs: no user or account ids.
 */
export function createAgentSshService({ db, clock, audit }: { db: Db; clock: Clock; audit: AuditService }) {
  const hosts = (serverId: string) => (installId: string) => repo.placedOn(db, installId, serverId);
  return {
    async decide(serverId: string, login: string, fingerprint: string | null, publicKey?: string) {
      const decision = await decideLogin(db, login, fingerprint, publicKey);
      if (!decision.installId || !(await repo.placedOn(db, decision.installId, serverId)))
        throw Errors.forbiddenWith('This login names no install placed on this server');
      return {
        allowed: decision.allowed,
        install_id: decision.installId,
        install_name: decision.installName,
        full_access: decision.fullAccess,
      };
    },
    async record(serverId: string, logins: SshLogin[]) {
      for (const event of logins)
        await recordLogin({ db, clock, audit }, event, { id: serverId, hosts: hosts(serverId) });
    },
  };
}

export type AgentSshService = ReturnType<typeof createAgentSshService>;

/**
 * Issue 31, the gateway of an sshd of Hostplane's (docs/decisions.md #161-#165, #200): answers sshd's
 * key lookups over a unix socket only root and `hpsshauth` can reach (a key opens an install when its
 * user may reach the install now: owners and full users every install of the account, partial users
 * their installs), follows sshd's log into audit events and counts, and every 2 s ends the sessions
 * whose key lost its access. Runs in the process that runs the local driver (`hostplane serve`/worker,
 * or a hosting server's agent); while it is down, or cannot get an answer, logins fail.
 */
export function createSshAccessService({
  sshd,
  authority,
  log = () => undefined,
}: {
  sshd: Sshd;
  authority: SshAuthority;
  log?: (message: string, err?: unknown) => void;
}) {
  const counts: SshCounts = {
    accepted: 0,
    refused: 0,
    ended: 0,
    lookups: 0,
    reused: 0,
    lookupErrors: 0,
  };
  /** Live sessions by process: the key and login that opened each (from sshd's log). */
  const sessions = new Map<number, { login: string; fingerprint: string }>();
  /** Session processes seen without a known key (ended the second time they are seen). */
  const unknown = new Set<number>();
  const decide = authority.decide;
  /** Decision 203: key lines answered to a connection's probe, for its signature's lookup (once). */
  const answered = new Map<string, { line: string; until: number }>();

  /** sshd's AuthorizedKeysCommand: the authorized_keys line for the offered key, or nothing. */
  async function keysFor(form: URLSearchParams): Promise<string> {
    counts.lookups++;
    const login = form.get('user') ?? '';
    const uid = form.get('uid') ?? '';
    const type = form.get('type') ?? '';
    const key = form.get('key') ?? '';
    const monitor = form.get('monitor') ?? '';
    if (
      !isLogin(login) ||
      !/^[0-9]{1,10}$/.test(uid) ||
      !KEY_TYPE.test(type) ||
      !BASE64.test(key) ||
      key.length > 8192
    )
      return '';
    // Decision 203: the signature's lookup on the connection whose probe was just answered reuses it
    // (the connection: sshd's process that runs both lookups, by pid and start time).
    const sshdProcess = /^[0-9]{1,10}$/.test(monitor) ? await processIdentity(Number(monitor)) : null;
    const connection = sshdProcess ? `${sshdProcess}\n${login}\n${uid}\n${type} ${key}` : null;
    const now = Date.now();
    const hit = connection ? answered.get(connection) : undefined;
    if (connection && hit) {
      answered.delete(connection);
      if (hit.until > now) {
        counts.reused++;
        return hit.line;
      }
    }
    const line = await lookUp(login, uid, type, key);
    if (connection && line) {
      if (answered.size >= MAX_ANSWERED)
        for (const [k, v] of answered) if (v.until <= now) answered.delete(k);
      if (answered.size < MAX_ANSWERED) answered.set(connection, { line, until: now + REUSE_MS });
    }
    return line;
  }

  async function lookUp(login: string, uid: string, type: string, key: string): Promise<string> {
    const decision = await decide(login, fingerprintOf(key), `${type} ${key}`);
    if (!decision.allowed || !decision.installId) return '';
    // The account sshd resolved for the login must be the install's own uid (decision 185): a name
    // some other account holds opens nothing, whatever the database says.
    const owner = (await readPasswd()).get(systemUser(decision.installId));
    if (!owner || owner.uid === 0 || owner.uid !== Number(uid)) return '';
    if (!sshd.shells) await sshd.ensureChroot(decision.installId, login);
    // The install user's own name (`hp` + 30 hex) has no shell (nologin, its pool's account): SFTP only.
    const shell = decision.fullAccess && !SYSTEM_LOGIN.test(login);
    return `${sshd.keyOptions(decision.installId, shell)} ${type} ${key}\n`;
  }

  async function record(event: SshLogin): Promise<void> {
    if (event.kind === 'accepted') counts.accepted++;
    else counts.refused++;
    await authority.record(event);
  }

  let lastAccepted: { login: string; fingerprint: string } | null = null;
  function track(event: SshdLogEvent) {
    if (event.kind === 'accepted') lastAccepted = { login: event.login, fingerprint: event.fingerprint };
    else if (event.kind === 'session' && lastAccepted) {
      sessions.set(event.pid, lastAccepted);
      lastAccepted = null;
    }
  }

  let follow: (() => Promise<SshdLogEvent[]>) | null = null;
  async function followLog() {
    if (!follow) return;
    for (const event of await follow()) {
      track(event);
      if (event.kind !== 'session') await record(event);
    }
  }

  /** Ends every live session whose key no longer opens its install (or that no key is known for). */
  async function reap() {
    const live = await sshd.sessions();
    const pids = new Set(live.map((s) => s.pid));
    for (const pid of sessions.keys()) if (!pids.has(pid)) sessions.delete(pid);
    for (const pid of unknown) if (!pids.has(pid)) unknown.delete(pid);
    for (const session of live) {
      const known = sessions.get(session.pid);
      let end = false;
      if (!known || known.login !== session.login) {
        end = unknown.has(session.pid);
        unknown.add(session.pid);
      } else end = !(await decide(session.login, known.fingerprint)).allowed;
      if (end && (await sshd.endSession(session))) {
        counts.ended++;
        sessions.delete(session.pid);
        unknown.delete(session.pid);
      }
    }
  }

  /** Decision 185: a login entry for each install name here, and a chroot link for each login. */
  async function syncLogins() {
    const ids = (await sshd.liveInstallIds()).slice(0, MAX_LOGINS);
    const names = await authority.installNames(ids);
    await sshd.syncLogins(names, AbortSignal.timeout(60_000));
    await sshd.pruneChroots(names);
  }

  let running = false;
  async function tick() {
    if (running) return;
    running = true;
    try {
      // Like nginx and PHP-FPM, sshd outlives Hostplane; one that died is started again here.
      if (!(await sshd.running())) {
        log('ssh gateway: sshd was not running; starting it');
        await sshd.start();
      }
      await followLog();
      await reap();
      await syncLogins();
    } catch (err) {
      // A database outage keeps open sessions (logins fail closed meanwhile); the next tick retries.
      log('ssh gateway: a round failed', err);
    } finally {
      running = false;
    }
  }

  let server: http.Server | null = null;
  let timer: NodeJS.Timeout | null = null;

  return {
    /** Listens on the key socket, reads which sessions are open from sshd's log, starts the reaper. */
    async start(): Promise<void> {
      if (server) return;
      await syncLogins().catch((err: unknown) => log('ssh gateway: the login sync failed', err));
      // Open sessions from before this process: their keys are in the log and the copy its last
      // rotation left (no audit events again).
      for (const file of [`${sshd.paths.log}.1`, sshd.paths.log]) {
        for (const event of await createLogFollower(file, true)()) track(event);
        lastAccepted = null;
      }
      follow = createLogFollower(sshd.paths.log, false, LOG_ROTATE_BYTES);
      await follow();
      const srv = http.createServer((req, res) => {
        if (req.method !== 'POST' || req.url !== '/ssh/keys') {
          res.writeHead(404).end();
          return;
        }
        let body = '';
        req.setEncoding('utf8');
        req.on('data', (chunk: string) => {
          body += chunk;
          if (body.length > MAX_BODY) req.destroy();
        });
        req.on('end', () => {
          keysFor(new URLSearchParams(body)).then(
            (lines) => res.writeHead(200, { 'content-type': 'text/plain' }).end(lines),
            (err: unknown) => {
              counts.lookupErrors++;
              log('ssh gateway: a key lookup failed', err);
              res.writeHead(503).end();
            },
          );
        });
      });
      srv.requestTimeout = 10_000;
      await fs.rm(sshd.paths.socket, { force: true });
      await new Promise<void>((resolve, reject) => {
        srv.once('error', reject);
        srv.listen(sshd.paths.socket, () => resolve());
      });
      server = srv;
      const { gid } = await fs.stat(sshd.paths.auth);
      await fs.chown(sshd.paths.socket, 0, gid);
      await fs.chmod(sshd.paths.socket, 0o660);
      timer = setInterval(() => void tick(), REAP_EVERY_MS);
    },

    /** One round now (tests; the timer runs them every 2 s). */
    tick,

    async close(): Promise<void> {
      if (timer) clearInterval(timer);
      timer = null;
      const srv = server;
      server = null;
      if (srv) await new Promise<void>((resolve) => srv.close(() => resolve()));
    },

    stats: (): SshCounts => ({ ...counts }),
    keysUser: KEYS_USER,
  };
}

export type SshAccessService = ReturnType<typeof createSshAccessService>;
