import type { Database } from './db/client.js';
import { withTransaction } from './db/transaction.js';
import { resealAcmeKeys } from './drivers/local/acme.js';
import { resealLocalSecrets } from './drivers/local/installs.js';
import { resealSimulatedSecrets } from './drivers/simulated/driver.js';
import { resealCertificateKeys } from './modules/certificates/certificates.service.js';
import { resealWebhookSecrets } from './modules/events/webhooks.service.js';
import { resealIdempotentResponses } from './modules/idempotency/idempotency.service.js';
import { resealOperationSecrets } from './modules/operations/operations.service.js';
import { createResealer, createSecretBox } from './secrets.js';

export interface ResealCounts {
  /** Values that were under the old key and are now under the new one. */
  resealed: number;
  /** Values already under the new key (a rerun, or written after the new key was deployed). */
  current: number;
}

/**
 * `hostplane reseal` (key rotation, docs/operations.md): every value sealed with the secret key
 * (certificate private keys, the simulated driver's CA and issued keys, the local driver's database
 * and WordPress administrator passwords, webhook secrets, ACME keys, operations' secrets not shown
 * yet, the stored answers of Idempotency-Key) is opened with `oldKey` and
 * sealed again with `newKey`, in one transaction: all of it moves, or nothing does (a value that opens
 * under neither key aborts the run). Safe to rerun: values already under the new key are skipped.
 */
export async function resealSecrets(
  database: Database,
  oldKey: string,
  newKey: string,
): Promise<ResealCounts> {
  if (oldKey === newKey) throw new Error('the old and the new secret key are the same');
  const reseal = createResealer(oldKey, newKey);
  return withTransaction(database.db, async (tx) => {
    const certificates = await resealCertificateKeys(tx, reseal);
    const simulated = await resealSimulatedSecrets(tx, reseal);
    const local = await resealLocalSecrets(tx, reseal);
    const webhooks = await resealWebhookSecrets(tx, reseal);
    const acme = await resealAcmeKeys(tx, reseal);
    const operations = await resealOperationSecrets(tx, reseal);
    const idempotent = await resealIdempotentResponses(tx, reseal, createSecretBox(newKey).seal);
    const parts = [certificates, simulated, local, webhooks, acme, operations, idempotent];
    return {
      resealed: parts.reduce((n, p) => n + p.resealed, 0),
      current: parts.reduce((n, p) => n + p.current, 0),
    };
  });
}
