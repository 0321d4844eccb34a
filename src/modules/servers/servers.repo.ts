import { and, asc, eq, gt, inArray, isNotNull, or, sql } from 'drizzle-orm';
import { type Db, queryRows, type RowOf } from '../../db/client.js';
import { type Page, selectPage } from '../../db/page.js';
import { accounts, fleetCalls, installPlacements, installs, operations, servers } from '../../db/schema.js';

/** A server as operators see it: never a hash. */
const projection = {
  id: servers.id,
  name: servers.name,
  labels: servers.labels,
  ipv4: servers.ipv4,
  ipv6: servers.ipv6,
  capacity_installs: servers.capacity_installs,
  state: servers.state,
  enrolled: sql<boolean>`(${servers.credential_hash} is not null)`.as('enrolled'),
  last_heartbeat_at: servers.last_heartbeat_at,
  agent_version: servers.agent_version,
  reported: servers.reported,
  created_at: servers.created_at,
  installs:
    sql<number>`(select count(*)::int from ${installPlacements} where ${installPlacements.server_id} = ${servers.id})`.as(
      'installs',
    ),
};
export type ServerRow = RowOf<typeof projection>;

export async function insertServer(db: Db, values: typeof servers.$inferInsert): Promise<ServerRow | null> {
  const [row] = await db.insert(servers).values(values).onConflictDoNothing().returning({ id: servers.id });
  return row ? getServer(db, row.id) : null;
}

export async function getServer(db: Db, id: string): Promise<ServerRow | null> {
  const [row] = await db.select(projection).from(servers).where(eq(servers.id, id));
  return row ?? null;
}

export function listServers(db: Db, page: Page) {
  return selectPage(
    db.select(projection).from(servers).$dynamic(),
    db.$count(servers),
    [asc(servers.created_at), asc(servers.id)],
    page,
  );
}

export async function updateServer(
  db: Db,
  id: string,
  values: Partial<typeof servers.$inferInsert>,
): Promise<boolean> {
  const rows = await db.update(servers).set(values).where(eq(servers.id, id)).returning({ id: servers.id });
  return rows.length > 0;
}

/** Deletes a server with no installs; `placed` when some are placed there, `missing` when unknown. */
export async function deleteServer(db: Db, id: string): Promise<'deleted' | 'placed' | 'missing'> {
  const [placed] = await db
    .select({ id: installPlacements.install_id })
    .from(installPlacements)
    .where(eq(installPlacements.server_id, id))
    .limit(1);
  if (placed) return 'placed';
  const rows = await db.delete(servers).where(eq(servers.id, id)).returning({ id: servers.id });
  return rows.length > 0 ? 'deleted' : 'missing';
}

export function listPlacements(db: Db, serverId: string, page: Page) {
  const where = eq(installPlacements.server_id, serverId);
  return selectPage(
    db
      .select({
        install_id: installPlacements.install_id,
        generation: installPlacements.generation,
        placed_at: installPlacements.placed_at,
      })
      .from(installPlacements)
      .where(where)
      .$dynamic(),
    db.$count(installPlacements, where),
    [asc(installPlacements.placed_at), asc(installPlacements.install_id)],
    page,
  );
}

// Credentials: the agent's side.

/** The hashes a request's credential is checked against (one row, read on every agent request). */
export async function credentialsOf(db: Db, id: string) {
  const [row] = await db
    .select({
      id: servers.id,
      credential_hash: servers.credential_hash,
      previous_credential_hash: servers.previous_credential_hash,
      previous_valid_until: servers.previous_valid_until,
      agent_session: servers.agent_session,
    })
    .from(servers)
    .where(eq(servers.id, id));
  return row ?? null;
}

/** The server whose enrolment token has this hash and has not expired. */
export async function findEnrolment(db: Db, enrolmentHash: string, now: Date): Promise<string | null> {
  const [row] = await db
    .select({ id: servers.id })
    .from(servers)
    .where(
      and(
        eq(servers.enrolment_hash, enrolmentHash),
        isNotNull(servers.enrolment_expires_at),
        gt(servers.enrolment_expires_at, now),
      ),
    );
  return row?.id ?? null;
}

/**
 * Spends the enrolment token: the server gets `credentialHash` (any earlier credential is replaced)
 * and the token is gone. False when the token was spent meanwhile (one use only).
 */
export async function enrol(db: Db, id: string, enrolmentHash: string, credentialHash: string) {
  const rows = await db
    .update(servers)
    .set({
      enrolment_hash: null,
      enrolment_expires_at: null,
      credential_hash: credentialHash,
      previous_credential_hash: null,
      previous_valid_until: null,
    })
    .where(and(eq(servers.id, id), eq(servers.enrolment_hash, enrolmentHash)))
    .returning({ id: servers.id });
  return rows.length > 0;
}

/** A rotation: the new hash becomes current, the current one stays valid until `graceUntil`. */
export async function rotate(db: Db, id: string, currentHash: string, newHash: string, graceUntil: Date) {
  const rows = await db
    .update(servers)
    .set({
      credential_hash: newHash,
      previous_credential_hash: currentHash,
      previous_valid_until: graceUntil,
    })
    .where(and(eq(servers.id, id), eq(servers.credential_hash, currentHash)))
    .returning({ id: servers.id });
  return rows.length > 0;
}

/** The first use of the new credential ends the old one's grace. */
export async function dropPrevious(db: Db, id: string) {
  await db
    .update(servers)
    .set({ previous_credential_hash: null, previous_valid_until: null })
    .where(and(eq(servers.id, id), isNotNull(servers.previous_credential_hash)));
}

export async function recordHeartbeat(
  db: Db,
  id: string,
  values: { agent_version: string; reported: unknown; at: Date },
) {
  await db
    .update(servers)
    .set({ agent_version: values.agent_version, reported: values.reported, last_heartbeat_at: values.at })
    .where(eq(servers.id, id));
}

/** Records the agent session; answers whether it changed (a restarted agent). */
export async function switchSession(db: Db, id: string, session: string): Promise<boolean> {
  const rows = await db
    .update(servers)
    .set({ agent_session: session })
    .where(
      and(
        eq(servers.id, id),
        or(sql`${servers.agent_session} is null`, sql`${servers.agent_session} <> ${session}`),
      ),
    )
    .returning({ id: servers.id });
  return rows.length > 0;
}

// Placement and calls: the remote driver's side.

export async function placementOf(db: Db, installId: string) {
  const [row] = await db
    .select({
      server_id: installPlacements.server_id,
      generation: installPlacements.generation,
      last_heartbeat_at: servers.last_heartbeat_at,
      server_name: servers.name,
    })
    .from(installPlacements)
    .innerJoin(servers, eq(servers.id, installPlacements.server_id))
    .where(eq(installPlacements.install_id, installId));
  return row ?? null;
}

/** Locks the install's row (placement is decided once per install); null when the install is gone. */
export async function lockInstall(tx: Db, installId: string) {
  const rows = await queryRows<{ id: string; preferred_data_center: string | null; plan: string }>(
    tx,
    sql`select ${installs.id} as id, ${accounts.preferred_data_center} as preferred_data_center,
          ${accounts.plan} as plan
        from ${installs} join ${accounts} on ${accounts.id} = ${installs.account_id}
        where ${installs.id} = ${installId} for update of ${installs}`,
  );
  return rows[0] ?? null;
}

/**
 * The live, active server with the most free install slots whose `region` label is `region` (any
 * server when null); null when none has room.
 */
export async function pickServer(tx: Db, region: string | null, liveSince: Date) {
  const rows = await queryRows<{ id: string }>(
    tx,
    sql`select s.id from ${servers} s
        where s.state = 'active' and s.last_heartbeat_at > ${liveSince.toISOString()}::timestamptz
          and (${region}::text is null or s.labels->>'region' = ${region}::text)
          and s.capacity_installs > (select count(*) from ${installPlacements} p where p.server_id = s.id)
        order by s.capacity_installs - (select count(*) from ${installPlacements} p where p.server_id = s.id) desc, s.id
        limit 1`,
  );
  return rows[0]?.id ?? null;
}

export async function insertPlacement(tx: Db, installId: string, serverId: string, at: Date) {
  await tx
    .insert(installPlacements)
    .values({ install_id: installId, server_id: serverId, generation: 1, placed_at: at })
    .onConflictDoNothing();
}

/** Issue 30: the install's stable IPs become its server's addresses (IPv4 first): decision #167. */
export async function setStableIpsFromServer(tx: Db, installId: string, serverId: string) {
  await tx.execute(
    sql`update ${installs} set stable_ips = ${servers.ipv4} || ${servers.ipv6}
        from ${servers} where ${servers.id} = ${serverId} and ${installs.id} = ${installId}`,
  );
}

/** A server's first public address (IPv4 first), or null when it has none: where a moved install's requests are passed (#241). */
export async function addressOf(db: Db, serverId: string): Promise<string | null> {
  const [row] = await db
    .select({ ipv4: servers.ipv4, ipv6: servers.ipv6 })
    .from(servers)
    .where(eq(servers.id, serverId));
  return row?.ipv4[0] ?? row?.ipv6[0] ?? null;
}

export async function deletePlacement(tx: Db, installId: string, generation: number) {
  await tx
    .delete(installPlacements)
    .where(and(eq(installPlacements.install_id, installId), eq(installPlacements.generation, generation)));
}

const callProjection = {
  id: fleetCalls.id,
  method: fleetCalls.method,
  key: fleetCalls.key,
  server_id: fleetCalls.server_id,
  install_id: fleetCalls.install_id,
  generation: fleetCalls.generation,
  input_sealed: fleetCalls.input_sealed,
  state: fleetCalls.state,
  result_sealed: fleetCalls.result_sealed,
  error: fleetCalls.error,
  final: fleetCalls.final,
  waiting_reason: fleetCalls.waiting_reason,
  job_id: fleetCalls.job_id,
  created_at: fleetCalls.created_at,
};
export type CallRow = RowOf<typeof callProjection>;

export async function callByKey(db: Db, method: string, key: string): Promise<CallRow | null> {
  const [row] = await db
    .select(callProjection)
    .from(fleetCalls)
    .where(and(eq(fleetCalls.method, method), eq(fleetCalls.key, key)));
  return row ?? null;
}

/**
 * The calls whose agent uploads an archive to the control plane: a backup another server reads, a
 * backup's download (#225) or a backup a move carries (#226).
 */
export const ARCHIVE_UPLOADS: readonly string[] = ['backup', 'exportArchive'];

/** The ids of the uploading calls whose key starts with `prefix` (a move's: `move:<operation>:`). */
export async function backupCallIds(db: Db, prefix: string): Promise<string[]> {
  const rows = await db
    .select({ id: fleetCalls.id })
    .from(fleetCalls)
    .where(
      and(inArray(fleetCalls.method, [...ARCHIVE_UPLOADS]), sql`starts_with(${fleetCalls.key}, ${prefix})`),
    );
  return rows.map((r) => r.id);
}

export async function callById(db: Db, id: string, lock = false): Promise<CallRow | null> {
  const query = db.select(callProjection).from(fleetCalls).where(eq(fleetCalls.id, id));
  const [row] = lock ? await query.for('update') : await query;
  return row ?? null;
}

export function settledCallsOf(db: Db, installId: string, method: string): Promise<CallRow[]> {
  return db
    .select(callProjection)
    .from(fleetCalls)
    .where(
      and(eq(fleetCalls.install_id, installId), eq(fleetCalls.method, method), eq(fleetCalls.state, 'done')),
    );
}

/** Inserts a call; null when `(method, key)` exists already (a concurrent first ask). */
export async function insertCall(tx: Db, values: typeof fleetCalls.$inferInsert): Promise<string | null> {
  const [row] = await tx
    .insert(fleetCalls)
    .values(values)
    .onConflictDoNothing()
    .returning({ id: fleetCalls.id });
  return row?.id ?? null;
}

export async function updateCall(tx: Db, id: string, values: Partial<typeof fleetCalls.$inferInsert>) {
  await tx.update(fleetCalls).set(values).where(eq(fleetCalls.id, id));
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * Issue 30: the reason a call waits, on the open operation it is part of (its key is the
 * operation's id, or the id and `:step`); a key of no operation changes nothing.
 */
export async function setOperationWaiting(tx: Db, callKey: string, reason: string | null) {
  const id = callKey.split(':')[0] ?? '';
  if (!UUID.test(id)) return;
  await tx
    .update(operations)
    .set({ waiting_reason: reason })
    .where(
      and(
        eq(operations.id, id),
        sql`${operations.status} in ('queued', 'in_progress')`,
        sql`${operations.waiting_reason} is distinct from ${reason}`,
      ),
    );
}

/** The operation a call's key names: `<operation id>[:...]`, or a move's `move:<operation id>:<step>`. */
export function operationOfKey(callKey: string): string | null {
  const [first, second] = callKey.split(':');
  const id = first === 'move' ? second : first;
  return id && UUID.test(id) ? id : null;
}

/** The current generation of an install's placement (null: not placed, or no longer). */
export async function generationOf(db: Db, installId: string, serverId: string): Promise<number | null> {
  const [row] = await db
    .select({ generation: installPlacements.generation })
    .from(installPlacements)
    .where(and(eq(installPlacements.install_id, installId), eq(installPlacements.server_id, serverId)));
  return row?.generation ?? null;
}

// Issue 30: moves and drains.

/** A server's name and last heartbeat (a call's wait reason names the server it is queued on). */
export async function heartbeatOf(db: Db, serverId: string) {
  const [row] = await db
    .select({ name: servers.name, last_heartbeat_at: servers.last_heartbeat_at, state: servers.state })
    .from(servers)
    .where(eq(servers.id, serverId));
  return row ?? null;
}

/**
 * Whether the open move `operationId` of the install names `(serverId, generation)` as its source or
 * its target: the only calls outside the install's placement an agent is handed (decision #175).
 */
export async function moveAllows(
  db: Db,
  operationId: string,
  installId: string,
  serverId: string,
  generation: number,
  /** A clean-up of the move's (decision #213): allowed after the move settled too. */
  settledToo = false,
): Promise<boolean> {
  const rows = await queryRows<{ id: string }>(
    db,
    sql`select o.id from ${operations} o
        where o.id = ${operationId}::uuid and o.install_id = ${installId}::uuid and o.type = 'move_install'
          and (o.status in ('queued', 'in_progress') or ${settledToo})
          and ((o.input->>'target_server_id' = ${serverId}::text and (o.state->>'target_generation')::int = ${generation}::int)
            or (o.state->>'source_server_id' = ${serverId}::text and (o.state->>'source_generation')::int = ${generation}::int))`,
  );
  return rows.length > 0;
}

/** The install's placement, its row locked (the switch of a move). */
export async function lockPlacement(tx: Db, installId: string) {
  const [row] = await tx
    .select({ server_id: installPlacements.server_id, generation: installPlacements.generation })
    .from(installPlacements)
    .where(eq(installPlacements.install_id, installId))
    .for('update');
  return row ?? null;
}

/** Moves the placement from `(from, generation)` to `to` at `generation + 1`; false when it is not there. */
export async function switchPlacement(
  tx: Db,
  installId: string,
  from: { serverId: string; generation: number },
  to: string,
  at: Date,
) {
  const rows = await tx
    .update(installPlacements)
    .set({ server_id: to, generation: from.generation + 1, placed_at: at })
    .where(
      and(
        eq(installPlacements.install_id, installId),
        eq(installPlacements.server_id, from.serverId),
        eq(installPlacements.generation, from.generation),
      ),
    )
    .returning({ id: installPlacements.install_id });
  return rows.length > 0;
}

/** The agent protocol of a server's last heartbeat (1 when none said: an agent before decision #243). */
const protocolOf = (server: ReturnType<typeof sql>) =>
  sql`coalesce((${server}.reported->>'protocol')::int, 1)`;

/**
 * A move's target: the live, active server other than `exclude` with the most free install slots
 * (open moves towards a server count as placed there), in `region` when given; null when none has room.
 */
export async function pickTarget(
  db: Db,
  exclude: string,
  region: string | null,
  liveSince: Date,
  /** The agent protocol the target must speak at least (a move's, decision #243). */
  minProtocol = 1,
) {
  const rows = await queryRows<{ id: string }>(
    db,
    sql`select s.id from ${servers} s
        where s.state = 'active' and s.id <> ${exclude}::uuid
          and s.last_heartbeat_at > ${liveSince.toISOString()}::timestamptz
          and (${region}::text is null or s.labels->>'region' = ${region}::text)
          and s.capacity_installs > ${usedSlots(sql`s.id`)}
          and ${protocolOf(sql`s`)} >= ${minProtocol}::int
        order by s.capacity_installs - ${usedSlots(sql`s.id`)} desc, s.id
        limit 1`,
  );
  return rows[0]?.id ?? null;
}

/** Installs placed on a server plus open moves towards it. */
const usedSlots = (server: ReturnType<typeof sql>) =>
  sql`((select count(*) from ${installPlacements} p where p.server_id = ${server})
      + (select count(*) from ${operations} o where o.type = 'move_install'
           and o.status in ('queued', 'in_progress') and o.input->>'target_server_id' = ${server}::text))`;

/** A server of a move (its target, or its source): its state, liveness, free slots (open moves counted), agent protocol and version. */
export async function targetOf(db: Db, serverId: string) {
  const rows = await queryRows<{
    id: string;
    name: string;
    state: string;
    last_heartbeat_at: Date | string | null;
    free: number;
    protocol: number;
    agent_version: string | null;
  }>(
    db,
    sql`select s.id, s.name, s.state, s.last_heartbeat_at, (s.capacity_installs - ${usedSlots(sql`s.id`)})::int as free,
          ${protocolOf(sql`s`)}::int as protocol, s.agent_version
        from ${servers} s where s.id = ${serverId}::uuid`,
  );
  return rows[0] ?? null;
}

/** Up to `limit` installs placed on a server (a drain starts their moves). */
export async function placedOn(db: Db, serverId: string, limit: number): Promise<string[]> {
  const rows = await db
    .select({ id: installPlacements.install_id })
    .from(installPlacements)
    .where(eq(installPlacements.server_id, serverId))
    .orderBy(asc(installPlacements.placed_at), asc(installPlacements.install_id))
    .limit(limit);
  return rows.map((r) => r.id);
}

/** The open move of an install, or its latest (with the state a view shows). */
export async function latestMove(db: Db, installId: string) {
  const [row] = await db
    .select({
      id: operations.id,
      status: operations.status,
      input: operations.input,
      state: operations.state,
      error: operations.error,
      created_at: operations.created_at,
      completed_at: operations.completed_at,
      expected_at: operations.expected_at,
    })
    .from(operations)
    .where(and(eq(operations.install_id, installId), eq(operations.type, 'move_install')))
    .orderBy(sql`${operations.created_at} desc`, sql`${operations.id} desc`)
    .limit(1);
  return row ?? null;
}

/** Issue 30: those of `installIds` placed on `serverId`, their rows locked (decision #212). */
export async function lockPlacedOn(tx: Db, serverId: string, installIds: string[]) {
  if (installIds.length === 0) return [];
  return queryRows<{ id: string; account_id: string; status: string }>(
    tx,
    sql`select ${installs.id} as id, ${installs.account_id} as account_id, ${installs.status} as status
        from ${installs} join ${installPlacements} on ${installPlacements.install_id} = ${installs.id}
        where ${installPlacements.server_id} = ${serverId}
          and ${inArray(installs.id, installIds)}
        order by ${installs.id} for update of ${installs}`,
  );
}

/**
 * Issue 30: whether the install's writes are frozen: an open move of it is in its final sync (phase
 * `syncing`; decision #211). The routing state of the install says so wherever it is applied.
 */
export async function isFrozen(db: Db, installId: string): Promise<boolean> {
  const rows = await queryRows<{ one: number }>(
    db,
    sql`select 1 as one from ${operations} where ${operations.install_id} = ${installId}
      and ${operations.type} = 'move_install' and ${operations.status} in ('queued', 'in_progress')
      and ${operations.state}->>'phase' = 'syncing' limit 1`,
  );
  return rows.length > 0;
}

/** The drain of a server: its latest drain id's moves counted by status. */
export async function drainProgress(db: Db, serverId: string) {
  const rows = await queryRows<{ drain_id: string | null; status: string; count: number }>(
    db,
    sql`with latest as (
          select o.input->>'drain_id' as drain_id from ${operations} o
          where o.type = 'move_install' and o.input->>'drain_id' is not null
            and o.state->>'source_server_id' = ${serverId}::text
          order by o.created_at desc limit 1)
        select l.drain_id, o.status, count(*)::int as count from latest l
        join ${operations} o on o.type = 'move_install' and o.input->>'drain_id' = l.drain_id
        group by l.drain_id, o.status`,
  );
  return rows;
}

/** The open moves of a drain (undrain cancels them). */
export async function openDrainMoves(db: Db, drainId: string): Promise<string[]> {
  const rows = await queryRows<{ install_id: string }>(
    db,
    sql`select o.install_id from ${operations} o where o.type = 'move_install'
          and o.status in ('queued', 'in_progress') and o.input->>'drain_id' = ${drainId}::text`,
  );
  return rows.map((r) => r.install_id);
}
