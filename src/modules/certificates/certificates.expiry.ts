import type { Clock } from '../../clock.js';
import type { Db } from '../../db/client.js';
import { withTransaction } from '../../db/transaction.js';
import type { JobHandler } from '../../jobs/catalog.js';
import { cancelDue, scheduleAt } from '../../jobs/due.js';
import type { EventRecorder } from '../events/events.service.js';
import type { InstallsService } from '../installs/installs.service.js';
import * as repo from './certificates.repo.js';

/** Issue 22: `certificate.expiring` is written this long before a certificate's not_after. */
export const EXPIRY_WARNING_DAYS = 14;
const DAY_MS = 86_400_000;

const dueKey = (certificateId: string) => `certificate-expiring:${certificateId}`;

/**
 * In the transaction that stores a certificate: its expiry warning as due work, at the start of the
 * warning window (at once when it is stored inside the window).
 */
export async function scheduleExpiryWarning(
  tx: Db,
  cert: { id: string; not_after: Date },
  now: Date,
): Promise<void> {
  const windowStart = cert.not_after.getTime() - EXPIRY_WARNING_DAYS * DAY_MS;
  await scheduleAt(
    tx,
    dueKey(cert.id),
    'certificate-expiring',
    { certificate_id: cert.id },
    new Date(Math.max(windowStart, now.getTime())),
  );
}

/** In the transaction that deletes certificates (replaced by a new one): their warnings are dropped. */
export async function cancelExpiryWarnings(tx: Db, certificateIds: string[]): Promise<void> {
  for (const id of certificateIds) await cancelDue(tx, dueKey(id));
}

export interface CertificateExpiryDeps {
  db: Db;
  clock: Clock;
  installs: Pick<InstallsService, 'findById'>;
  events: EventRecorder;
}

/**
 * The `certificate-expiring` job: the certificate is marked warned and its event written in one
 * transaction, only by the call that marks it, so a retried or repeated job writes nothing more. A
 * certificate deleted meanwhile (replaced, or its install deleted) gets no warning.
 */
export function createCertificateExpiryJob({ db, clock, installs, events }: CertificateExpiryDeps) {
  const job: JobHandler<{ certificate_id: string }> = {
    async run({ certificate_id }) {
      await withTransaction(db, async (tx) => {
        const now = clock.now();
        const cert = await repo.markExpiryWarned(tx, certificate_id, now);
        if (!cert) return;
        const install = await installs.findById(cert.install_id, tx);
        if (!install) return;
        await events.record(tx, {
          account_id: install.account_id,
          install_id: install.id,
          type: 'certificate.expiring',
          resource: { type: 'ssl_certificate', id: cert.id },
          data: {
            certificate_id: cert.id,
            subject: cert.subject,
            issuer: cert.issuer,
            serial_number: cert.serial,
            fingerprint: cert.fingerprint,
            expires_time: cert.not_after.toISOString(),
            days_left: Math.max(0, Math.floor((cert.not_after.getTime() - now.getTime()) / DAY_MS)),
          },
        });
      });
    },
    // The warning is a convenience: after the retries (database failures) it is not tried again.
    async exhausted() {},
  };
  return job;
}
