import type { Clock } from '../../clock.js';
import type { Db } from '../../db/client.js';
import { sqlState } from '../../db/errors.js';
import { Errors } from '../../errors.js';
import type { EventRecorder } from '../events/events.service.js';
import type { InstallRow, InstallsService } from '../installs/installs.service.js';
import type { RequestRouting } from '../routing/routing.service.js';
import { txtRecordsMatch, verificationBase, verificationRecordName } from './domain-name.js';
import * as repo from './domains.repo.js';
import { RESOURCE } from './domains.rules.js';
import { lookupTxt, type TxtResolver } from './txt-resolver.js';

export interface VerificationDeps {
  db: Db;
  clock: Clock;
  installs: Pick<InstallsService, 'setPrimaryDomain'>;
  resolver: TxtResolver;
  /** Runs `fn` in a transaction holding the install's lock. */
  locked: <T>(installId: string, fn: (tx: Db, install: InstallRow) => Promise<T>) => Promise<T>;
  /** Issue 28 finding 8 (D6): a domain serves once verified, so its verification re-applies routing. */
  requestRouting: RequestRouting;
  /** Issue 22: `domain.verified` and `domain.verification_failed`, in the transaction of the answer. */
  events?: EventRecorder;
}

const verifiedElsewhere = (name: string) =>
  Errors.valueUnavailable(
    RESOURCE,
    'name',
    `${name} is already verified on another install`,
    'domain_verified_elsewhere',
  );

/** What a verification found: the domain verified (now or before), still pending, or gone. */
export type VerificationOutcome = 'verified' | 'pending' | 'gone';

/**
 * D7: verifyDomainTxtRecord. Looks the TXT record up now; a match verifies the domain, no record (or
 * another value) leaves it pending. DNS failures are 503/502 and change nothing. The same lookup runs
 * in the background for a week after a domain is added (domains.verify.jobs.ts, decision 249):
 * `background` checks write no `domain.verification_failed` event (the customer did not ask).
 */
export function createDomainVerification(deps: VerificationDeps) {
  const { db, clock, installs, resolver, locked, events, requestRouting } = deps;

  /** The event of a verification's answer, in `tx` (the domain row as it was before the answer). */
  const recordAnswer = (
    tx: Db,
    install: InstallRow,
    domain: repo.DomainRow,
    type: 'domain.verified' | 'domain.verification_failed',
    extra: Record<string, unknown>,
  ) =>
    events?.record(tx, {
      account_id: install.account_id,
      install_id: install.id,
      type,
      resource: { type: 'domain', id: domain.id },
      data: {
        domain_id: domain.id,
        name: domain.name,
        record_name: domain.txt_verification_key ?? verificationRecordName(domain.name),
        ...extra,
      },
    });

  async function markVerified(install: InstallRow, domain: repo.DomainRow) {
    await locked(install.id, async (tx, lockedInstall) => {
      const current = await repo.findDomain(tx, install.id, domain.id);
      if (!current) throw Errors.notFound();
      // Verified (or deleted and re-made) meanwhile: nothing left to do.
      if (current.txt_verification_value !== domain.txt_verification_value) return;
      // D6: the name is served from now on (by this install only: the unique index below).
      await requestRouting(tx, lockedInstall);
      await repo.updateDomain(tx, domain.id, {
        ownership_status: 'TXT_VERIFIED',
        txt_verified_time: clock.now(),
        txt_verified_domain: verificationBase(domain.name),
        txt_verification_key: null,
        txt_verification_value: null,
      });
      await recordAnswer(tx, install, domain, 'domain.verified', {
        verified_domain: verificationBase(domain.name),
      });
      // D3: the name's records on other installs are duplicates now, and a duplicate is never primary.
      for (const other of await repo.demoteDuplicates(tx, domain.name, domain.id)) {
        await installs.setPrimaryDomain(tx, other, null);
      }
    });
  }

  /**
   * The lookup answered without the value: the domain stays pending and the failed check is an
   * event (unless the domain was verified, deleted or re-made meanwhile).
   */
  async function markFailed(install: InstallRow, domain: repo.DomainRow, records: number) {
    await locked(install.id, async (tx) => {
      const current = await repo.findDomain(tx, install.id, domain.id);
      if (!current) throw Errors.notFound();
      if (current.txt_verification_value !== domain.txt_verification_value) return;
      await recordAnswer(tx, install, domain, 'domain.verification_failed', {
        reason: records === 0 ? 'no_txt_record' : 'value_mismatch',
      });
    });
  }

  /** Returns after the domain is verified or found still pending; the caller answers the domain. */
  return async function verify(
    install: InstallRow,
    domainId: string,
    options: { background?: boolean } = {},
  ): Promise<VerificationOutcome> {
    const domain = await repo.findDomain(db, install.id, domainId);
    if (!domain) throw Errors.notFound();
    const value = domain.txt_verification_value;
    if (domain.ownership_status === 'TXT_VERIFIED' || !value) return 'verified';
    if (domain.duplicate) throw verifiedElsewhere(domain.name);
    // Outside any transaction: a DNS lookup can take seconds (style rule 5).
    const records = await lookupTxt(resolver, verificationRecordName(domain.name));
    if (!txtRecordsMatch(records, value)) {
      if (!options.background) await markFailed(install, domain, records.length);
      return 'pending';
    }
    try {
      await markVerified(install, domain);
      return 'verified';
    } catch (err) {
      const state = sqlState(err);
      if (state?.code === '23505' && state.constraint === 'domains_verified_name_key') {
        throw verifiedElsewhere(domain.name);
      }
      throw err;
    }
  };
}
