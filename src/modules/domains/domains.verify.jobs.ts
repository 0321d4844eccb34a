import type { Clock } from '../../clock.js';
import type { Db } from '../../db/client.js';
import { AppError } from '../../errors.js';
import type { JobHandler } from '../../jobs/catalog.js';
import { cancelDue, scheduleAt } from '../../jobs/due.js';
import type { InstallRow } from '../installs/installs.service.js';
import * as repo from './domains.repo.js';
import type { VerificationOutcome } from './domains.verify.service.js';

/**
 * D7 in the background (decision 249): a pending domain is looked up again on its own for this long
 * after it was added, so a customer who puts the TXT record in place sees the domain verified (and
 * served, D6) without asking again. After it, only the verification route checks.
 */
const BACKGROUND_VERIFICATION_DAYS = 7;
const DAY_MS = 86_400_000;
const MINUTE_MS = 60_000;

const dueKey = (domainId: string) => `verify_domain:${domainId}`;

/**
 * The wait before the next check of a domain added `ageMs` ago: a quarter of its age, between a
 * minute and six hours (every minute for the first minutes, when a customer who just added the
 * record is waiting; every 15 minutes at an hour; every 6 hours from the first day on): 54 lookups
 * over the week.
 */
function nextCheckDelayMs(ageMs: number): number {
  return Math.min(6 * 60 * MINUTE_MS, Math.max(MINUTE_MS, Math.floor(ageMs / 4)));
}

/** In the transaction that adds domains: each one's first background check, a minute later. */
export async function scheduleBackgroundVerification(
  tx: Db,
  installId: string,
  domainIds: string[],
  now: Date,
): Promise<void> {
  for (const id of domainIds)
    await scheduleAt(
      tx,
      dueKey(id),
      'verify_domain',
      { install_id: installId, domain_id: id, added_at: now.toISOString() },
      new Date(now.getTime() + MINUTE_MS),
    );
}

/** In the transaction that deletes a domain: its background checks are dropped. */
export const cancelBackgroundVerification = (tx: Db, domainId: string) => cancelDue(tx, dueKey(domainId));

export interface BackgroundVerificationDeps {
  db: Db;
  clock: Clock;
  findInstall: (installId: string) => Promise<InstallRow | null>;
  verify: (
    install: InstallRow,
    domainId: string,
    options: { background: true },
  ) => Promise<VerificationOutcome>;
}

/**
 * The `verify_domain` job: the domain's record looked up as `POST .../verification` does (the same
 * checks and effects), without the failure event. Still pending, a DNS failure (503/502) or the name
 * verified on another install (it may be released): the next check is scheduled, until a week after
 * the domain was added. A domain verified, deleted or re-made meanwhile ends its checks. Any other
 * failure (the database) is retried by the queue, and after the retries the next check is scheduled
 * all the same, so an outage does not end a domain's checks.
 */
export function createBackgroundVerificationJob({
  db,
  clock,
  findInstall,
  verify,
}: BackgroundVerificationDeps) {
  type Payload = { install_id: string; domain_id: string; added_at: string };

  async function scheduleNext(payload: Payload) {
    const domain = await repo.findDomain(db, payload.install_id, payload.domain_id);
    if (!domain || domain.ownership_status === 'TXT_VERIFIED') return;
    // The week counts on the service's clock (the row's created_at is the database's).
    const added = Date.parse(payload.added_at);
    const now = clock.now().getTime();
    const next = now + nextCheckDelayMs(now - added);
    if (next >= added + BACKGROUND_VERIFICATION_DAYS * DAY_MS) return;
    await scheduleAt(db, dueKey(payload.domain_id), 'verify_domain', payload, new Date(next));
  }

  const job: JobHandler<Payload> = {
    async run(payload) {
      const install = await findInstall(payload.install_id);
      if (!install) return;
      let outcome: VerificationOutcome;
      try {
        outcome = await verify(install, payload.domain_id, { background: true });
      } catch (err) {
        // 404: deleted meanwhile. 503/502 (DNS) and 400 (verified elsewhere): checked again later.
        if (!(err instanceof AppError)) throw err;
        outcome = err.status === 404 ? 'gone' : 'pending';
      }
      if (outcome === 'pending') await scheduleNext(payload);
    },
    async exhausted(payload) {
      await scheduleNext(payload);
    },
  };
  return job;
}
