import type { Clock } from '../../clock.js';
import type { Db } from '../../db/client.js';
import { sqlState } from '../../db/errors.js';
import { Errors } from '../../errors.js';
import type { InstallRow, InstallsService } from '../installs/installs.service.js';
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
  locked: <T>(installId: string, fn: (tx: Db) => Promise<T>) => Promise<T>;
}

const verifiedElsewhere = (name: string) =>
  Errors.valueUnavailable(
    RESOURCE,
    'name',
    `${name} is already verified on another install`,
    'domain_verified_elsewhere',
  );

/**
 * D7: verifyDomainTxtRecord. Looks the TXT record up now; a match verifies the domain, no record (or
 * another value) leaves it pending. DNS failures are 503/502 and change nothing. The background
 * retry (7 days with back-off) belongs to the job engine and is not here yet.
 */
export function createDomainVerification({ db, clock, installs, resolver, locked }: VerificationDeps) {
  async function markVerified(install: InstallRow, domain: repo.DomainRow) {
    await locked(install.id, async (tx) => {
      const current = await repo.findDomain(tx, install.id, domain.id);
      if (!current) throw Errors.notFound();
      // Verified (or deleted and re-made) meanwhile: nothing left to do.
      if (current.txt_verification_value !== domain.txt_verification_value) return;
      await repo.updateDomain(tx, domain.id, {
        ownership_status: 'TXT_VERIFIED',
        txt_verified_time: clock.now(),
        txt_verified_domain: verificationBase(domain.name),
        txt_verification_key: null,
        txt_verification_value: null,
      });
      // D3: the name's records on other installs are duplicates now, and a duplicate is never primary.
      for (const other of await repo.demoteDuplicates(tx, domain.name, domain.id)) {
        await installs.setPrimaryDomain(tx, other, null);
      }
    });
  }

  /** Returns after the domain is verified or found still pending; the caller answers the domain. */
  return async function verify(install: InstallRow, domainId: string): Promise<void> {
    const domain = await repo.findDomain(db, install.id, domainId);
    if (!domain) throw Errors.notFound();
    const value = domain.txt_verification_value;
    if (domain.ownership_status === 'TXT_VERIFIED' || !value) return;
    if (domain.duplicate) throw verifiedElsewhere(domain.name);
    // Outside any transaction: a DNS lookup can take seconds (style rule 5).
    const records = await lookupTxt(resolver, verificationRecordName(domain.name));
    if (!txtRecordsMatch(records, value)) return;
    try {
      await markVerified(install, domain);
    } catch (err) {
      const state = sqlState(err);
      if (state?.code === '23505' && state.constraint === 'domains_verified_name_key') {
        throw verifiedElsewhere(domain.name);
      }
      throw err;
    }
  };
}
