import { eq } from 'drizzle-orm';
import type { Db } from '../../db/client.js';
import { offloadSettings } from '../../db/schema.js';
import type { StoredSettings } from './offload.schemas.js';

export type { StoredSettings };

export async function findSettings(db: Db, installId: string): Promise<StoredSettings | null> {
  const [row] = await db
    .select({ settings: offloadSettings.largefs_settings })
    .from(offloadSettings)
    .where(eq(offloadSettings.install_id, installId));
  return (row?.settings as StoredSettings | undefined) ?? null;
}

export async function saveSettings(db: Db, installId: string, settings: StoredSettings, now: Date) {
  await db
    .insert(offloadSettings)
    .values({ install_id: installId, largefs_settings: settings, updated_at: now })
    .onConflictDoUpdate({
      target: offloadSettings.install_id,
      set: { largefs_settings: settings, updated_at: now },
    });
}
