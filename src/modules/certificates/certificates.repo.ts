import { and, asc, desc, eq, gt, inArray, isNull } from 'drizzle-orm';
import type { Db, RowOf } from '../../db/client.js';
import { type Page, selectPage } from '../../db/page.js';
import { certificates } from '../../db/schema.js';

// The sealed private key is never selected for a response: only the key rotation (sealedKeys) reads it.
const projection = {
  id: certificates.id,
  install_id: certificates.install_id,
  chain_pem: certificates.chain_pem,
  subject: certificates.subject,
  issuer: certificates.issuer,
  serial: certificates.serial,
  fingerprint: certificates.fingerprint,
  not_before: certificates.not_before,
  not_after: certificates.not_after,
  created_at: certificates.created_at,
};
export type CertificateRow = RowOf<typeof projection>;

export async function listCertificates(db: Db, installId: string, page: Page) {
  const where = eq(certificates.install_id, installId);
  return selectPage(
    db.select(projection).from(certificates).where(where).$dynamic(),
    db.$count(certificates, where),
    [asc(certificates.created_at), asc(certificates.id)],
    page,
  );
}

/** Every certificate of the install, newest first. */
export function certificatesOfInstall(db: Db, installId: string): Promise<CertificateRow[]> {
  return db
    .select(projection)
    .from(certificates)
    .where(eq(certificates.install_id, installId))
    .orderBy(desc(certificates.created_at), desc(certificates.id));
}

export async function insertCertificate(
  db: Db,
  values: typeof certificates.$inferInsert,
): Promise<CertificateRow> {
  const [row] = await db.insert(certificates).values(values).returning(projection);
  if (!row) throw new Error('insert returned no row');
  return row;
}

/** Deleting the row is what makes a replaced certificate's key unreadable. */
export async function deleteCertificates(db: Db, installId: string, ids: string[]): Promise<void> {
  if (ids.length === 0) return;
  await db
    .delete(certificates)
    .where(and(eq(certificates.install_id, installId), inArray(certificates.id, ids)));
}

/** Issue 21: every certificate of the install with its sealed key, newest first (for the web server only). */
export function sealedOfInstall(db: Db, installId: string) {
  return db
    .select({
      id: certificates.id,
      chain_pem: certificates.chain_pem,
      sealed: certificates.private_key_sealed,
    })
    .from(certificates)
    .where(eq(certificates.install_id, installId))
    .orderBy(desc(certificates.created_at), desc(certificates.id));
}

/** `hostplane reseal`: the next `limit` sealed private keys after `afterId`, in id order. */
export function sealedKeys(tx: Db, afterId: string | null, limit: number) {
  return tx
    .select({ id: certificates.id, sealed: certificates.private_key_sealed })
    .from(certificates)
    .where(afterId ? gt(certificates.id, afterId) : undefined)
    .orderBy(asc(certificates.id))
    .limit(limit);
}

export async function setSealedKey(tx: Db, id: string, sealed: string) {
  await tx.update(certificates).set({ private_key_sealed: sealed }).where(eq(certificates.id, id));
}

/**
 * Issue 22: marks the certificate warned of its expiry, once: the row (with its install's account)
 * when this call marked it, null when it is gone or was marked before.
 */
export async function markExpiryWarned(db: Db, id: string, now: Date) {
  const [row] = await db
    .update(certificates)
    .set({ expiry_warned_at: now })
    .where(and(eq(certificates.id, id), isNull(certificates.expiry_warned_at)))
    .returning({
      id: certificates.id,
      install_id: certificates.install_id,
      subject: certificates.subject,
      issuer: certificates.issuer,
      serial: certificates.serial,
      fingerprint: certificates.fingerprint,
      not_after: certificates.not_after,
    });
  return row ?? null;
}
