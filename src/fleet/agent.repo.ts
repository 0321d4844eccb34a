import { eq, inArray, sql } from 'drizzle-orm';
import type { Db } from '../db/client.js';
import { accounts, installs } from '../db/schema.js';

/**
 * Issue 30: the agent's own database (its DATA_DIR, never the control plane's) records the installs
 * this server hosts, under one local account, as the drivers' tables expect an install row (the
 * simulated driver's state references it; the local driver reads its name for WordPress's title).
 */
const LOCAL_ACCOUNT = '00000000-0000-4000-8000-000000000030';

export async function ensureInstall(db: Db, id: string, name: string | null) {
  await db.insert(accounts).values({ id: LOCAL_ACCOUNT, name: 'this hosting server' }).onConflictDoNothing();
  await db
    .insert(installs)
    .values({ id, account_id: LOCAL_ACCOUNT, name: name || `hp-${id}`, status: 'active' })
    .onConflictDoNothing();
}

export async function forgetInstall(db: Db, id: string) {
  await db.delete(installs).where(eq(installs.id, id));
}

export async function installIds(db: Db): Promise<string[]> {
  const rows = await db.select({ id: installs.id }).from(installs);
  return rows.map((r) => r.id);
}

export async function countInstalls(db: Db): Promise<number> {
  const [row] = await db.select({ n: sql<number>`count(*)::int` }).from(installs);
  return Number(row?.n ?? 0);
}

/** Issue 31: the names of these installs (this server's sshd admits them as logins, decision 185). */
export async function installNames(db: Db, ids: string[]): Promise<Map<string, string>> {
  if (ids.length === 0) return new Map();
  const rows = await db
    .select({ id: installs.id, name: installs.name })
    .from(installs)
    .where(inArray(installs.id, ids));
  return new Map(rows.map((r) => [r.id, r.name]));
}
