import { createPrivateKey, randomUUID, type X509Certificate } from 'node:crypto';
import type { Caller } from '../../auth/access.js';
import type { Clock } from '../../clock.js';
import type { Db } from '../../db/client.js';
import type { Page } from '../../db/page.js';
import { withTransaction } from '../../db/transaction.js';
import { Errors } from '../../errors.js';
import { type ResealCount, type Resealer, resealEach, type SecretBox } from '../../secrets.js';
import type { DomainsService, SslStatus } from '../domains/domains.service.js';
import type { InstallRow, InstallsService } from '../installs/installs.service.js';
import { type RequestRouting, routingApplies } from '../routing/routing.service.js';
import {
  coversDomain,
  describeIssued,
  leafOf,
  type ValidatedImport,
  validateImport,
} from './certificate-chain.js';
import { cancelExpiryWarnings, scheduleExpiryWarning } from './certificates.expiry.js';
import * as repo from './certificates.repo.js';

export interface CertificatesDeps {
  db: Db;
  clock: Clock;
  installs: Pick<InstallsService, 'requireInstall' | 'lock'>;
  domains: Pick<DomainsService, 'namesOf' | 'find'>;
  /** Seals private keys at rest (AES-256-GCM under HOSTPLANE_SECRET_KEY). */
  secretBox: SecretBox;
  /** Roots a chain may end under without including them (default: Node's Mozilla list). */
  trustedRoots: () => readonly X509Certificate[];
  /** Issue 21: a stored certificate is served by the web server (routing module). */
  requestRouting: RequestRouting;
}

/** L1: an import's body (base64-encoded PEM chain and key). */
type ImportInput = { certificate: string; private_key: string };

/** A certificate row with the install's domains it covers today. */
/** `expired`: past not_after by the injected clock (the record's status, issue 13). */
export type CertificateView = repo.CertificateRow & { domains: string[]; expired: boolean };

/**
 * The SSL status of domain names (for domain records): a part of the certificates module that needs
 * no domains service, so the domains service can be built on it.
 */
export function createCertificateCoverage({ db, clock }: { db: Db; clock: Clock }) {
  return {
    /**
     * `active` when a valid certificate covers the name, `expired` when only expired ones do; and
     * `changesAt`, the first moment after now at which a certificate's validity changes (null: never),
     * until which these statuses hold (the read cache keeps a domain list no longer, issue 14).
     */
    async sslStatusOf(
      installId: string,
      names: string[],
    ): Promise<{ status: Map<string, SslStatus>; changesAt: number | null }> {
      const now = clock.now().getTime();
      const rows = await repo.certificatesOfInstall(db, installId);
      const certs = rows.map((row) => ({
        leaf: leafOf(row.chain_pem),
        valid: row.not_before.getTime() <= now && now <= row.not_after.getTime(),
      }));
      const status = new Map<string, SslStatus>();
      for (const name of names) {
        const covering = certs.filter((c) => coversDomain(c.leaf, name));
        status.set(name, covering.some((c) => c.valid) ? 'active' : covering.length > 0 ? 'expired' : 'none');
      }
      const changes = rows
        .flatMap((row) => [row.not_before.getTime(), row.not_after.getTime() + 1])
        .filter((t) => t > now);
      return { status, changesAt: changes.length > 0 ? Math.min(...changes) : null };
    },
  };
}

export function createCertificatesService(deps: CertificatesDeps) {
  const { db, clock, installs, domains, secretBox } = deps;

  function withCoverage(rows: repo.CertificateRow[], names: string[]): CertificateView[] {
    return rows.map((row) => {
      const leaf = leafOf(row.chain_pem);
      const domains = names.filter((name) => coversDomain(leaf, name));
      return { ...row, domains, expired: row.not_after.getTime() < clock.now().getTime() };
    });
  }

  /** The certificates of the install that `cert` replaces: those whose covered domains it covers too. */
  async function replacedBy(tx: Db, installId: string, cert: ValidatedImport, names: string[]) {
    const existing = withCoverage(await repo.certificatesOfInstall(tx, installId), names);
    return existing.filter((c) => c.domains.every((name) => cert.covered.includes(name))).map((c) => c.id);
  }

  /** L1: the checks of an import before its transaction: the install, then chain and key. */
  async function validated(caller: Caller, installId: string, input: ImportInput) {
    await installs.requireInstall(caller, installId, 'installs:operate');
    const names = await domains.namesOf(installId);
    const imported = validateImport(input, {
      now: clock.now(),
      domainNames: names,
      trustedRoots: deps.trustedRoots(),
    });
    return { names, imported };
  }

  /** In the import's transaction: the install locked (404 once gone). */
  async function lockedInstall(tx: Db, installId: string) {
    const install = await installs.lock(tx, installId);
    if (!install) throw Errors.notFound();
    return install;
  }

  /**
   * Stores a certificate and seals its key, in the caller's transaction (the install locked). It
   * replaces every certificate of the install whose covered domains it covers too.
   */
  async function store(tx: Db, install: InstallRow, cert: ValidatedImport, names: string[]) {
    const installId = install.id;
    await deps.requestRouting(tx, install);
    const id = randomUUID();
    const sealed = secretBox.seal(cert.keyDer, id);
    const replaced = await replacedBy(tx, installId, cert, names);
    await repo.deleteCertificates(tx, installId, replaced);
    await cancelExpiryWarnings(tx, replaced);
    const row = await repo.insertCertificate(tx, {
      id,
      install_id: installId,
      chain_pem: cert.chainPem,
      private_key_sealed: sealed,
      subject: cert.subject,
      issuer: cert.issuer,
      serial: cert.serial,
      fingerprint: cert.fingerprint,
      not_before: cert.notBefore,
      not_after: cert.notAfter,
    });
    // Issue 22: `certificate.expiring` when it enters its warning window (certificates.expiry.ts).
    await scheduleExpiryWarning(tx, row, clock.now());
    return row;
  }

  return {
    /**
     * createDomainCertificateOrder's job: stores what the platform issued, in the completing
     * transaction; `names` are the install's domain names (read before it: PGlite has one connection).
     */
    async storeIssued(
      tx: Db,
      installId: string,
      issued: { chain_pem: string; key_pem: string },
      names: string[],
    ) {
      const cert = describeIssued(issued.chain_pem, issued.key_pem, names);
      const install = await installs.lock(tx, installId);
      if (!install) throw Errors.notFound();
      const row = await store(tx, install, cert, names);
      return { ...row, domains: cert.covered };
    },

    /**
     * L1/L2: validates chain and key, seals the key, and stores the certificate. It replaces every
     * certificate of the install whose covered domains it covers too; their rows (and sealed keys)
     * are deleted in the same transaction.
     */
    async importThirdParty(caller: Caller, installId: string, input: ImportInput) {
      const { names, imported } = await validated(caller, installId, input);
      const row = await withTransaction(db, async (tx) =>
        store(tx, await lockedInstall(tx, installId), imported, names),
      );
      return { ...row, domains: imported.covered, expired: false };
    },

    /**
     * Issue 22, `?dry_run=true`: the checks of `importThirdParty` (in a transaction that writes
     * nothing) and what it would do: the certificate it would store (never its key), the ones it
     * would replace, the routing it would apply.
     */
    async importDryRun(caller: Caller, installId: string, input: ImportInput) {
      const { names, imported } = await validated(caller, installId, input);
      return withTransaction(db, async (tx) => {
        const install = await lockedInstall(tx, installId);
        return {
          dry_run: true as const,
          install_id: installId,
          domains: imported.covered,
          subject: imported.subject,
          issuer: imported.issuer,
          serial: imported.serial,
          fingerprint: imported.fingerprint,
          not_before: imported.notBefore.toISOString(),
          not_after: imported.notAfter.toISOString(),
          replaces: await replacedBy(tx, installId, imported, names),
          operation: routingApplies(install) ? ('apply_routing' as const) : null,
        };
      });
    },

    /**
     * For the routing job (issue 21): every certificate of the install with its key opened (PEM),
     * newest first, each with the install's domain names it covers. Never for a response.
     */
    async servedOf(installId: string) {
      const names = await domains.namesOf(installId);
      const rows = await repo.sealedOfInstall(db, installId);
      return rows.map((row) => {
        const leaf = leafOf(row.chain_pem);
        const key = createPrivateKey({
          key: secretBox.open(row.sealed, row.id),
          format: 'der',
          type: 'pkcs8',
        });
        return {
          names: names.filter((name) => coversDomain(leaf, name)),
          chain_pem: row.chain_pem,
          key_pem: key.export({ format: 'pem', type: 'pkcs8' }).toString(),
        };
      });
    },

    async list(caller: Caller, installId: string, page: Page) {
      await installs.requireInstall(caller, installId, 'installs:read');
      const { count, rows } = await repo.listCertificates(db, installId, page);
      return { count, rows: withCoverage(rows, await domains.namesOf(installId)) };
    },

    /** The newest certificate of the install that covers the domain; 404 when none does. */
    async forDomain(caller: Caller, installId: string, domainId: string): Promise<CertificateView> {
      const { domain } = await domains.find(caller, installId, domainId);
      const rows = await repo.certificatesOfInstall(db, installId);
      const row = rows.find((r) => coversDomain(leafOf(r.chain_pem), domain.name));
      if (!row) throw Errors.notFound();
      const [view] = withCoverage([row], await domains.namesOf(installId));
      if (!view) throw Errors.notFound();
      return view;
    },
  };
}

export type CertificatesService = ReturnType<typeof createCertificatesService>;

/**
 * `hostplane reseal`: every certificate private key sealed under the new secret key, inside the
 * caller's transaction, in batches. Keys already under the new key are left as they are.
 */
export async function resealCertificateKeys(tx: Db, reseal: Resealer) {
  const count: ResealCount = { resealed: 0, current: 0 };
  let after: string | null = null;
  for (;;) {
    const batch = await repo.sealedKeys(tx, after, 500);
    await resealEach(
      batch,
      reseal,
      (row) => ({ sealed: row.sealed, context: row.id }),
      (row, next) => repo.setSealedKey(tx, row.id, next),
      count,
    );
    const last = batch.at(-1);
    if (!last) return count;
    after = last.id;
  }
}
