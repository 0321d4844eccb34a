import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Db } from '../db/client.js';
import {
  type CallContext,
  DriverError,
  type DriverResult,
  type HostingDriver,
  type InstallRef,
  type Snapshot,
} from '../drivers/driver.js';
import type { Sshd } from '../drivers/local/sshd.js';
import { createSshAccessService } from '../modules/ssh-access/ssh-access.service.js';
import * as agentRepo from './agent.repo.js';
import {
  type ArchiveLink,
  downloadArchive,
  snapshotOf,
  uploadArchive,
  withSnapshot,
} from './agent-archives.js';
import { agentSshAuthority } from './agent-ssh.js';
import { REMOTE_METHODS, type RemoteMethod } from './remote-driver.js';

/** The agent protocol spoken (modules/servers/servers.service.ts AGENT_PROTOCOL, decision #243). */
export const AGENT_PROTOCOL = 2;

export interface AgentDeps {
  /** The control plane's base URL (http or https). */
  controlPlaneUrl: string;
  /** Where the server's credential is kept (written 0600). */
  credentialFile: string;
  /** Used once, when the credential file does not exist yet. */
  enrolmentToken: string | null;
  heartbeatSeconds: number;
  /** The driver of this server (local, or simulated in tests). */
  driver: HostingDriver;
  version: string;
  /** The directory whose file system's free space is reported. */
  dataDir: string;
  log: (message: string) => void;
  signal: AbortSignal;
  /** Test mode: called with a call's method and outcome after the work, before the report. */
  beforeReport?: (method: string, status: string) => void;
  /** The installs this server hosts, in the agent's own database (agent.repo.ts). */
  installs: {
    ensure(id: string, name: string | null): Promise<void>;
    forget(id: string): Promise<void>;
    count(): Promise<number>;
    ids(): Promise<string[]>;
    /** The names of these installs (the logins of this server's sshd). */
    names(ids: string[]): Promise<Map<string, string>>;
  };
  /**
   * Issue 31 (decision 200): the server's sshd (SSH_PORT), whose key lookups the agent answers by asking
   * the control plane with its own credential; null without SSH.
   */
  sshd?: Sshd | null;
  /** How often the server is compared with its installs (drivers/driver.ts `reconcile`). */
  reconcileSeconds: number;
}

interface Call {
  id: string;
  job_id: string;
  method: string;
  key: string;
  input: unknown;
  envelope: { server_id: string; install_id: string; generation: number };
}

/** The agent stops: its credential was refused (revoked) or the protocol is not spoken. */
export class AgentStopped extends Error {}

/** The control plane answered a request with an error status. */
export class AgentHttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** How soon a heartbeat that failed is tried again (decision #233). */
const HEARTBEAT_RETRY_MS = 1000;

/** Waits `ms` or until `signal` aborts; the abort listener goes with the wait. */
const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });

/** Reads the credential file, refusing one that others can read. */
function readCredential(file: string): string | null {
  let stat: fs.Stats;
  try {
    stat = fs.statSync(file);
  } catch {
    return null;
  }
  if ((stat.mode & 0o077) !== 0)
    throw new AgentStopped(
      `${file} can be read by others (mode ${(stat.mode & 0o777).toString(8)}): chmod 600 it`,
    );
  return fs.readFileSync(file, 'utf8').trim();
}

/** Writes the credential 0600, atomically (a temporary file renamed over it). */
function writeCredential(file: string, credential: string) {
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  const temporary = `${file}.${process.pid}.tmp`;
  const fd = fs.openSync(temporary, 'wx', 0o600);
  try {
    fs.writeSync(fd, `${credential}\n`);
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
  fs.renameSync(temporary, file);
}

/** What an `exportArchive` call carries: the install and the snapshot of its backup (decision #225). */
type ExportInput = { install: InstallRef; snapshot: Snapshot };

/** The calls the driver runs (`exportArchive` and `adoptBackup` are the agent's own, see run()). */
type DriverMethod = Exclude<RemoteMethod, 'exportArchive' | 'adoptBackup'>;

/** Runs one call with the server's own driver (the method is checked against the list first). */
function runCall(driver: HostingDriver, method: DriverMethod, ctx: CallContext, input: unknown) {
  const call: Record<DriverMethod, () => Promise<DriverResult<unknown>>> = {
    provision: () => driver.provision(ctx, input as InstallRef),
    copy: () => driver.copy(ctx, input as never),
    backup: () => driver.backup(ctx, input as InstallRef),
    restore: () => driver.restore(ctx, input as never),
    measureDisk: () => driver.measureDisk(ctx, input as InstallRef),
    purgeCache: () => driver.purgeCache(ctx, input as never),
    issueCertificate: () => driver.issueCertificate(ctx, input as never),
    applyRouting: () => driver.applyRouting(ctx, input as never),
    deprovision: () => driver.deprovision(ctx, input as InstallRef),
  };
  return call[method]();
}

const isMethod = (method: string): method is RemoteMethod => Object.hasOwn(REMOTE_METHODS, method);

/**
 * Issue 30: `hostplane agent`. Enrols once (the token for a credential kept 0600), then heartbeats
 * and pulls its own server's calls from the control plane, runs each with its driver under the call's
 * key, one at a time (the one writer of this server), and reports the outcome until the report is
 * accepted. Resolves when `signal` aborts; rejects with AgentStopped when the credential is refused.
 */
export async function runAgent(deps: AgentDeps): Promise<void> {
  const { controlPlaneUrl, driver, log, signal } = deps;
  let credential = readCredential(deps.credentialFile);
  const newSession = () => randomBytes(12).toString('base64url');
  let session = newSession();
  /** The highest placement generation seen per install: an older call is refused (stale). */
  const generations = new Map<string, number>();
  /**
   * Installs deprovisioned here since their last provision: a call for one that arrives after its
   * removal (asked before it, in a transaction that committed after it) is refused, never run: run,
   * it brought the install back (its record here, a server block for a tree that is gone). A
   * provision (a new placement, a move's target) admits the install again (decision #232).
   */
  const removed = new Set<string>();

  const archiveLink: ArchiveLink = {
    controlPlaneUrl,
    credential: () => credential,
    signal,
    log,
    refused: (route) => new AgentStopped(`the control plane refused the credential (${route}): re-enrol`),
  };

  async function request(method: string, route: string, body?: unknown, timeoutMs = 30_000) {
    const send = (requestSignal: AbortSignal) => sendRequest(method, route, body, requestSignal);
    // One controller per request (AbortSignal.any would leave a listener on `signal` per request).
    const controller = new AbortController();
    const abort = () => controller.abort();
    signal.addEventListener('abort', abort, { once: true });
    const timer = setTimeout(abort, timeoutMs);
    try {
      return await send(controller.signal);
    } finally {
      clearTimeout(timer);
      signal.removeEventListener('abort', abort);
    }
  }

  async function sendRequest(method: string, route: string, body: unknown, requestSignal: AbortSignal) {
    const res = await fetch(`${controlPlaneUrl}${route}`, {
      method,
      headers: {
        ...(credential && { authorization: `Bearer ${credential}` }),
        ...(body !== undefined && { 'content-type': 'application/json' }),
      },
      ...(body !== undefined && { body: JSON.stringify(body) }),
      signal: requestSignal,
    });
    const text = await res.text();
    const json = text ? (JSON.parse(text) as Record<string, unknown>) : {};
    if (res.status === 401)
      throw new AgentStopped(`the control plane refused the credential (${route}): re-enrol`);
    if (res.status === 409 && route === '/agent/v1/heartbeat') throw new AgentStopped(String(json.message));
    if (res.status >= 400)
      throw new AgentHttpError(res.status, `${route}: ${res.status} ${String(json.message ?? '')}`);
    return json;
  }

  if (!credential) {
    if (!deps.enrolmentToken)
      throw new AgentStopped(
        `no credential in ${deps.credentialFile} and no AGENT_ENROLMENT_TOKEN to enrol with`,
      );
    const enrolled = await request('POST', '/agent/v1/enrol', { token: deps.enrolmentToken });
    writeCredential(deps.credentialFile, String(enrolled.credential));
    credential = String(enrolled.credential);
    log(`enrolled as server ${String(enrolled.server_id)}`);
  }

  /** What the last reconcile found missing (sent with each heartbeat until the next one). */
  let drift: string[] = [];
  /** Installs whose server block is gone: the control plane applies their routing again (#212). */
  let routingMissing: string[] = [];
  async function reconcile() {
    if (!driver.reconcile) return;
    try {
      const found = await driver.reconcile(await deps.installs.ids());
      for (const line of found.repaired) log(`reconcile: ${line}`);
      if (found.drift.join('\n') !== drift.join('\n'))
        log(`reconcile: ${found.drift.length === 0 ? 'no drift' : found.drift.join('; ')}`);
      drift = found.drift.slice(0, 100).map((line) => line.slice(0, 300));
      routingMissing = (found.routing_missing ?? []).slice(0, 100);
    } catch (err) {
      if (!signal.aborted) log(`reconcile failed: ${(err as Error).message}`);
    }
  }

  async function capacity() {
    const disk = await fs.promises.statfs(deps.dataDir);
    return {
      disk_total_bytes: disk.blocks * disk.bsize,
      disk_free_bytes: disk.bavail * disk.bsize,
      memory_total_bytes: os.totalmem(),
      memory_free_bytes: os.freemem(),
      load1: os.loadavg()[0] ?? 0,
      installs: await deps.installs.count(),
      drift,
      routing_missing: routingMissing,
    };
  }

  const heartbeat = async () =>
    request('POST', '/agent/v1/heartbeat', {
      protocol: AGENT_PROTOCOL,
      agent_version: deps.version,
      report: await capacity(),
    });

  /** Reports until accepted (a lost answer is retried: the control plane acknowledges a repeat). */
  async function report(call: Call, outcome: Record<string, unknown>) {
    for (let delay = 500; !signal.aborted; delay = Math.min(delay * 2, 10_000)) {
      try {
        await request('POST', `/agent/v1/calls/${call.id}/report`, { job_id: call.job_id, ...outcome });
        return true;
      } catch (err) {
        if (err instanceof AgentStopped) throw err;
        log(`report of call ${call.id} failed, retrying: ${(err as Error).message}`);
        await sleep(delay, signal);
      }
    }
    return false;
  }

  /** An `exportArchive` call: the backup's archive uploaded under the call's id; answers where it is. */
  async function exportArchive(callId: string, { install, snapshot }: ExportInput) {
    const uploaded = await uploadArchive(archiveLink, driver, callId, install, snapshot);
    return { done: true as const, value: { archive: uploaded.archive } };
  }

  /**
   * An `adoptBackup` call (decision #226): the backup a move carries, downloaded from the control plane
   * and kept here for good; answers the snapshot as this server holds it, without the archive (a
   * later restore reads it here, it downloads nothing). A driver without files (simulated): as is.
   */
  async function adoptBackup(callId: string, installId: string, { snapshot }: ExportInput) {
    const { archive: _archive, ...rest } = snapshot;
    if (!driver.importBackup || !snapshot.archive) return { done: true as const, value: rest };
    const kept = await driver.importBackup(
      installId,
      snapshot,
      () => downloadArchive(archiveLink, callId),
      signal,
      { keep: true },
    );
    const { archive: _imported, ...held } = kept;
    return { done: true as const, value: held };
  }

  /** The agent's own calls (not the driver's), or the driver's. */
  function runOwn(call: Call & { method: RemoteMethod }, input: unknown) {
    if (call.method === 'exportArchive') return exportArchive(call.id, input as ExportInput);
    if (call.method === 'adoptBackup')
      return adoptBackup(call.id, call.envelope.install_id, input as ExportInput);
    return runCall(driver, call.method, { key: call.key, signal }, input);
  }

  async function run(call: Call) {
    const install = call.envelope.install_id;
    const seen = generations.get(install) ?? 0;
    if (call.envelope.generation < seen || !isMethod(call.method)) {
      const error = isMethod(call.method)
        ? `stale placement generation ${call.envelope.generation} (this server has seen ${seen})`
        : `this agent does not know the call ${call.method}`;
      await report(call, { status: 'failed', error, final: true });
      return;
    }
    if (removed.has(install) && call.method !== 'provision' && call.method !== 'deprovision') {
      const error = `install ${install} was removed from this server; a ${call.method} for it runs only after it is provisioned here again`;
      await report(call, { status: 'failed', error, final: true });
      return;
    }
    if (call.method === 'provision') removed.delete(install);
    generations.set(install, call.envelope.generation);
    const ref = call.input as { name?: unknown; install?: { name?: unknown } } | null;
    const name = ref?.name ?? ref?.install?.name;
    await deps.installs.ensure(install, typeof name === 'string' ? name : null);
    let outcome: Record<string, unknown>;
    try {
      let input = call.input;
      // Issue 30 (decision #195): a copy or restore from another server's backup fetches its archive first.
      const snapshot = snapshotOf(call.method, input);
      if (snapshot?.archive && driver.importBackup)
        input = withSnapshot(
          call.method,
          input,
          await driver.importBackup(install, snapshot, () => downloadArchive(archiveLink, call.id), signal),
        );
      // Issue 30 (decision #225): a backup's archive asked for its download goes to the control plane.
      const result = await runOwn({ ...call, method: call.method }, input);
      // A backup another server will read: its archive goes to the control plane before the report.
      const upload = (input as { upload_archive?: unknown } | null)?.upload_archive === true;
      const value =
        result.done && upload && call.method === 'backup'
          ? await uploadArchive(archiveLink, driver, call.id, input as InstallRef, result.value as Snapshot)
          : result.done
            ? result.value
            : null;
      outcome = result.done
        ? { status: 'done', result: value ?? null }
        : { status: 'pending', check_at: result.checkAt.toISOString() };
    } catch (err) {
      if (signal.aborted) return;
      const final = err instanceof DriverError && err.final;
      outcome = { status: 'failed', error: (err as Error).message || 'failed', final };
    }
    deps.beforeReport?.(call.method, String(outcome.status));
    if (!(await report(call, outcome))) return;
    const why = outcome.status === 'failed' ? `: ${String(outcome.error).slice(0, 300)}` : '';
    log(`call ${call.method} of install ${install}: ${String(outcome.status)}${why}`);
    // The control plane keeps the administrator password now (sealed): the driver forgets its copy.
    if (call.method === 'provision' && outcome.status === 'done') await driver.forgetAdminPassword?.(install);
    if (call.method === 'deprovision' && outcome.status === 'done') {
      generations.delete(install);
      removed.add(install);
      await deps.installs.forget(install);
    }
  }

  await heartbeat();
  log(`agent ${deps.version} connected to ${controlPlaneUrl} (session ${session})`);
  // Issue 31 (decision 200): this server's sshd asks through the agent, for this server's installs only.
  const sshAccess = deps.sshd
    ? createSshAccessService({
        sshd: deps.sshd,
        authority: agentSshAuthority({
          ask: (route, body, timeoutMs) => request('POST', route, body, timeoutMs),
          installNames: deps.installs.names,
          statusOf: (err) => (err instanceof AgentHttpError ? err.status : null),
        }),
        log: (message, err) => {
          if (!signal.aborted) log(`${message}${err ? `: ${(err as Error).message}` : ''}`);
        },
      })
    : null;
  await sshAccess?.start();
  let stopped: unknown = null;
  // Issue 30: at start and every reconcileSeconds; a call and a reconcile never run at once (the one
  // writer of this server): the reconcile waits for the call in progress (`busy`).
  let busy: Promise<void> = Promise.resolve();
  const ending = new AbortController();
  const end = () => ending.abort();
  signal.addEventListener('abort', end, { once: true });
  const reconciles = (async () => {
    while (!ending.signal.aborted && !stopped) {
      await busy;
      await reconcile();
      await sleep(deps.reconcileSeconds * 1000, ending.signal);
    }
  })();
  // After a failed heartbeat the next comes within HEARTBEAT_RETRY_MS, not a whole interval: a server
  // whose link came back is shown live again within a second or two (it took the full 10 s;
  // bench/README.md, detection). Being shown silent is the control plane's margin
  // (FLEET_SILENT_SECONDS), which a retry does not shorten (decision #233).
  const beats = (async () => {
    let failed = false;
    while (!signal.aborted && !stopped) {
      await sleep(
        failed ? Math.min(HEARTBEAT_RETRY_MS, deps.heartbeatSeconds * 1000) : deps.heartbeatSeconds * 1000,
        signal,
      );
      if (signal.aborted) return;
      try {
        await heartbeat();
        failed = false;
      } catch (err) {
        if (err instanceof AgentStopped) stopped = err;
        else if (!signal.aborted) {
          if (!failed)
            log(`heartbeat failed, trying again every ${HEARTBEAT_RETRY_MS} ms: ${(err as Error).message}`);
          failed = true;
        }
      }
    }
  })();
  try {
    while (!signal.aborted && !stopped) {
      let calls: Call[];
      try {
        const fetched = await request(
          'POST',
          '/agent/v1/calls/fetch',
          { session, max: 5, wait_seconds: 20 },
          60_000,
        );
        calls = fetched.calls as Call[];
      } catch (err) {
        if (err instanceof AgentStopped) throw err;
        if (signal.aborted) break;
        // The answer may have been lost with calls in it (a network cut): a new session gives back
        // whatever the control plane handed out to this server (this agent holds nothing between
        // fetches), instead of waiting for their expiry (docs/decisions.md #168).
        session = newSession();
        log(`fetch failed, retrying: ${(err as Error).message}`);
        await sleep(2000, signal);
        continue;
      }
      for (const call of calls) {
        if (signal.aborted) break;
        const running = run(call);
        busy = running.catch(() => undefined);
        await running;
      }
    }
  } finally {
    end();
    signal.removeEventListener('abort', end);
    await beats;
    await reconciles;
    await sshAccess?.close();
  }
  if (stopped) throw stopped;
}

/** The agent's record of its installs, in its own database (agent.repo.ts). */
export const agentInstalls = (db: Db): AgentDeps['installs'] => ({
  ensure: (id, name) => agentRepo.ensureInstall(db, id, name),
  forget: (id) => agentRepo.forgetInstall(db, id),
  count: () => agentRepo.countInstalls(db),
  ids: () => agentRepo.installIds(db),
  names: (ids) => agentRepo.installNames(db, ids),
});
