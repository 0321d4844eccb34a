import { createHash, randomBytes } from 'node:crypto';
import { isIP } from 'node:net';
import type { Clock } from '../../clock.js';
import type { FleetConfig } from '../../config.js';
import type { Db } from '../../db/client.js';
import type { Page } from '../../db/page.js';
import { withTransaction } from '../../db/transaction.js';
import { Errors } from '../../errors.js';
import type { JobQueue } from '../../jobs/queue.js';
import * as repo from './servers.repo.js';

/**
 * The agent protocols this control plane speaks (decision #243): `hostplane agent` sends its own; one
 * outside MIN_AGENT_PROTOCOL..AGENT_PROTOCOL is refused, naming both. An older agent within the range
 * keeps the work it knows (every driver call of protocol 1) and gets nothing it does not: a move needs
 * MOVE_PROTOCOL on both its servers. 2: a move's calls (`frozen`, `warm`, `forward_to`, the final
 * sync's `index_files`/`changes_since`/`table_fingerprints`, `adoptBackup`), which an agent of
 * protocol 1 would ignore or refuse.
 */
export const AGENT_PROTOCOL = 2;
export const MIN_AGENT_PROTOCOL = 1;
export const MOVE_PROTOCOL = 2;

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');
const secret = () => randomBytes(32).toString('base64url');
const ENROLMENT = /^hpe_[A-Za-z0-9_-]{43}$/;
const CREDENTIAL = /^hps_([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})_([A-Za-z0-9_-]{43})$/;
const MAX_HEADER = 256;

export type ServerStatus = 'new' | 'live' | 'silent';

export interface ServerInput {
  name: string;
  labels?: Record<string, string>;
  ipv4?: string[];
  ipv6?: string[];
  capacity: { installs: number };
}

export interface ServerPatch {
  labels?: Record<string, string>;
  state?: string;
  capacity?: { installs: number };
  ipv4?: string[];
  ipv6?: string[];
}

/** Addresses the schema's formats let through are checked again with node's parser (one family each). */
function checkAddresses(input: { ipv4?: string[]; ipv6?: string[] }) {
  for (const [field, list, family] of [
    ['ipv4', input.ipv4, 4],
    ['ipv6', input.ipv6, 6],
  ] as const) {
    list?.forEach((address, i) => {
      if (isIP(address) !== family)
        throw Errors.invalidValue('server', `${field}[${i}]`, `Not an IPv${family} address: ${address}`);
    });
  }
}

/**
 * Issue 30: hosting servers (admin), their enrolment and credentials (agents). Credentials and
 * enrolment tokens are stored as SHA-256 hashes (docs/decisions.md #153) and shown once.
 */
export function createServersService({
  db,
  clock,
  queue,
  fleet,
}: {
  db: Db;
  clock: Clock;
  queue: Pick<JobQueue, 'ensureServerQueue' | 'deleteServerQueue' | 'putBackServerJobs'>;
  fleet: FleetConfig;
}) {
  const statusOf = (row: { last_heartbeat_at: Date | null }): ServerStatus => {
    if (!row.last_heartbeat_at) return 'new';
    return clock.now().getTime() - row.last_heartbeat_at.getTime() > fleet.silentSeconds * 1000
      ? 'silent'
      : 'live';
  };

  const enrolmentToken = () => {
    const token = `hpe_${secret()}`;
    const expires = new Date(clock.now().getTime() + fleet.enrolmentTtlSeconds * 1000);
    return { token, expires, hash: sha256(token) };
  };

  const get = async (id: string) => {
    const row = await repo.getServer(db, id);
    if (!row) throw Errors.notFound();
    return row;
  };

  return {
    /** Issue 30: whether the install's writes are frozen by its move's final sync (decision #211). */
    isFrozen: (installId: string) => repo.isFrozen(db, installId),

    statusOf,

    /** Creates a server and its pg-boss queue; answers it with its first enrolment token (shown once). */
    async create(input: ServerInput) {
      checkAddresses(input);
      const enrolment = enrolmentToken();
      const row = await repo.insertServer(db, {
        name: input.name,
        labels: input.labels ?? {},
        ipv4: input.ipv4 ?? [],
        ipv6: input.ipv6 ?? [],
        capacity_installs: input.capacity.installs,
        enrolment_hash: enrolment.hash,
        enrolment_expires_at: enrolment.expires,
        created_at: clock.now(),
      });
      if (!row)
        throw Errors.valueUnavailable('server', 'name', `A server named ${input.name} exists already`);
      await queue.ensureServerQueue(row.id);
      return { server: row, enrolment: { token: enrolment.token, expires_at: enrolment.expires } };
    },

    list: (page: Page) => repo.listServers(db, page),
    get,

    async patch(id: string, patch: ServerPatch) {
      checkAddresses(patch);
      const changed = await repo.updateServer(db, id, {
        ...(patch.labels && { labels: patch.labels }),
        ...(patch.state && { state: patch.state }),
        ...(patch.capacity && { capacity_installs: patch.capacity.installs }),
        ...(patch.ipv4 && { ipv4: patch.ipv4 }),
        ...(patch.ipv6 && { ipv6: patch.ipv6 }),
      });
      if (!changed) throw Errors.notFound();
      return get(id);
    },

    /** Refused (409) while installs are placed on the server. */
    async remove(id: string) {
      const outcome = await repo.deleteServer(db, id);
      if (outcome === 'missing') throw Errors.notFound();
      if (outcome === 'placed')
        throw Errors.conflict('Installs are placed on this server: move or delete them first');
      await queue.deleteServerQueue(id);
    },

    /** A new one-time enrolment token (the previous unused one stops working); the credential stays. */
    async newEnrolment(id: string) {
      const enrolment = enrolmentToken();
      const changed = await repo.updateServer(db, id, {
        enrolment_hash: enrolment.hash,
        enrolment_expires_at: enrolment.expires,
      });
      if (!changed) throw Errors.notFound();
      return { token: enrolment.token, expires_at: enrolment.expires };
    },

    /** Both credentials dropped: the agent's next request is a 401 (it needs a new enrolment). */
    async revoke(id: string) {
      const changed = await repo.updateServer(db, id, {
        credential_hash: null,
        previous_credential_hash: null,
        previous_valid_until: null,
      });
      if (!changed) throw Errors.notFound();
      return get(id);
    },

    placements: async (id: string, page: Page) => {
      await get(id);
      return repo.listPlacements(db, id, page);
    },

    // The agent's side (/agent/v1).

    /** Exchanges a one-time enrolment token for the server's credential (replacing any earlier one). */
    async enrol(token: string) {
      if (!ENROLMENT.test(token)) throw Errors.unauthenticated();
      const hash = sha256(token);
      const id = await repo.findEnrolment(db, hash, clock.now());
      if (!id) throw Errors.unauthenticated();
      const credential = `hps_${id}_${secret()}`;
      if (!(await repo.enrol(db, id, hash, sha256(credential)))) throw Errors.unauthenticated();
      return { server_id: id, credential };
    },

    /**
     * The server of an agent's `Authorization: Bearer hps_...`, or a 401: no credential, a revoked one,
     * or the previous one after its grace. The first use of a rotated credential ends the old one's grace.
     */
    async authenticate(header: string | undefined): Promise<{ serverId: string; credentialHash: string }> {
      if (!header || header.length > MAX_HEADER) throw Errors.unauthenticated();
      const bearer = /^Bearer\s+(\S+)\s*$/i.exec(header)?.[1] ?? '';
      const match = CREDENTIAL.exec(bearer);
      if (!match?.[1]) throw Errors.unauthenticated();
      const row = await repo.credentialsOf(db, match[1]);
      if (!row) throw Errors.unauthenticated();
      const hash = sha256(bearer);
      if (row.credential_hash === hash) {
        if (row.previous_credential_hash) await repo.dropPrevious(db, row.id);
        return { serverId: row.id, credentialHash: hash };
      }
      const graceful =
        row.previous_credential_hash === hash &&
        row.previous_valid_until !== null &&
        row.previous_valid_until > clock.now();
      if (!graceful) throw Errors.unauthenticated();
      return { serverId: row.id, credentialHash: hash };
    },

    /** A new credential for the agent; the one it called with stays valid for the grace (decision #154). */
    async rotate(serverId: string, currentHash: string) {
      const credential = `hps_${serverId}_${secret()}`;
      const grace = new Date(clock.now().getTime() + fleet.rotationGraceSeconds * 1000);
      // Rotating from the previous credential (in its grace) is refused: only the current one rotates.
      if (!(await repo.rotate(db, serverId, currentHash, sha256(credential), grace)))
        throw Errors.conflict('Only the current credential can be rotated');
      return { credential, previous_valid_until: grace };
    },

    async heartbeat(serverId: string, beat: { protocol: number; agent_version: string; report: unknown }) {
      if (beat.protocol < MIN_AGENT_PROTOCOL || beat.protocol > AGENT_PROTOCOL)
        throw Errors.conflict(
          `Agent ${beat.agent_version} speaks agent protocol ${beat.protocol}; this control plane speaks protocols ${MIN_AGENT_PROTOCOL} to ${AGENT_PROTOCOL}: ${beat.protocol < MIN_AGENT_PROTOCOL ? 'upgrade the agent' : 'upgrade the control plane first'}`,
        );
      // The protocol is kept with the report: what the server's agent can be sent (decision #243).
      await repo.recordHeartbeat(db, serverId, {
        agent_version: beat.agent_version,
        reported: { ...(beat.report as object), protocol: beat.protocol },
        at: clock.now(),
      });
      const row = await get(serverId);
      return { server_id: row.id, name: row.name, state: row.state, heartbeat_seconds: null };
    },

    /** A new agent process (session): the server's asks still active were the dead process's: given back. */
    async session(serverId: string, session: string) {
      if (!(await repo.switchSession(db, serverId, session))) return 0;
      return withTransaction(db, (tx) =>
        queue.putBackServerJobs(tx, serverId, 'the agent restarted: asked again'),
      );
    },
  };
}

export type ServersService = ReturnType<typeof createServersService>;
export type { ServerRow } from './servers.repo.js';
