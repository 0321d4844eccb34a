import { and, desc, eq, sql } from 'drizzle-orm';
import type { Db, RowOf } from '../db/client.js';
import { type Page, selectPage } from '../db/page.js';
import { mailOutbox } from '../db/schema.js';

const projection = {
  id: mailOutbox.id,
  operation_id: mailOutbox.operation_id,
  event: mailOutbox.event,
  to_address: mailOutbox.to_address,
  subject: mailOutbox.subject,
  text_body: mailOutbox.text_body,
  html_body: mailOutbox.html_body,
  status: mailOutbox.status,
  attempts: mailOutbox.attempts,
  last_error: mailOutbox.last_error,
  created_at: mailOutbox.created_at,
  sent_at: mailOutbox.sent_at,
};
export type MailRow = RowOf<typeof projection>;

/** Inserts messages; one per (operation, event, address) ever, so a retried completion adds none. */
export async function insertMessages(tx: Db, rows: (typeof mailOutbox.$inferInsert)[]): Promise<string[]> {
  if (rows.length === 0) return [];
  const inserted = await tx
    .insert(mailOutbox)
    .values(rows)
    .onConflictDoNothing()
    .returning({ id: mailOutbox.id });
  return inserted.map((r) => r.id);
}

export async function findMessage(db: Db, id: string): Promise<MailRow | null> {
  const [row] = await db.select(projection).from(mailOutbox).where(eq(mailOutbox.id, id));
  return row ?? null;
}

export async function recordAttempt(db: Db, id: string) {
  await db
    .update(mailOutbox)
    .set({ attempts: sql`${mailOutbox.attempts} + 1` })
    .where(eq(mailOutbox.id, id));
}

/** Moves a pending message to `status` (sent, kept, failed); a message that already left stays. */
export async function settle(
  db: Db,
  id: string,
  values: { status: string; sent_at?: Date; last_error?: string },
) {
  await db
    .update(mailOutbox)
    .set(values)
    .where(and(eq(mailOutbox.id, id), eq(mailOutbox.status, 'pending')));
}

export async function recordError(db: Db, id: string, error: string) {
  await db.update(mailOutbox).set({ last_error: error }).where(eq(mailOutbox.id, id));
}

export async function listMessages(db: Db, page: Page) {
  return selectPage(
    db.select(projection).from(mailOutbox).$dynamic(),
    db.$count(mailOutbox),
    [desc(mailOutbox.created_at), desc(mailOutbox.id)],
    page,
  );
}

export const ERASED_BODY = '(erased after delivery: this message held a one-time link)';

/** A delivered (or abandoned) message that held a secret keeps its headers, not its bodies. */
export async function eraseIfSensitive(db: Db, id: string) {
  await db
    .update(mailOutbox)
    .set({ text_body: ERASED_BODY, html_body: ERASED_BODY })
    .where(
      and(eq(mailOutbox.id, id), eq(mailOutbox.sensitive, true), sql`${mailOutbox.status} <> 'pending'`),
    );
}
