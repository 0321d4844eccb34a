import { and, desc, eq } from 'drizzle-orm';
import type { Db } from '../../db/client.js';
import { operations } from '../../db/schema.js';

/** The result of the install's last completed provisioning (its WordPress administrator), or null. */
export async function provisioningResult(db: Db, installId: string): Promise<unknown> {
  const [row] = await db
    .select({ result: operations.result })
    .from(operations)
    .where(
      and(
        eq(operations.install_id, installId),
        eq(operations.type, 'provision_install'),
        eq(operations.status, 'completed'),
      ),
    )
    .orderBy(desc(operations.completed_at))
    .limit(1);
  return row?.result ?? null;
}
