import { randomBytes } from 'node:crypto';
import type { Caller } from '../../auth/access.js';
import type { Clock } from '../../clock.js';
import type { Db } from '../../db/client.js';
import type { Page } from '../../db/page.js';
import { withTransaction } from '../../db/transaction.js';
import { Errors, type FieldError } from '../../errors.js';
import type { EventRecorder } from '../events/events.service.js';
import type { InstallRow, InstallsService } from '../installs/installs.service.js';
import { type RequestRouting, routingApplies } from '../routing/routing.service.js';
import { VERIFICATION_VALUE_PREFIX, verificationRecordName } from './domain-name.js';
import * as repo from './domains.repo.js';
import {
  batchFailure,
  checkAgainstDatabase,
  checkBatch,
  checkNewItem,
  checkUpdate,
  invalid,
  type NewDomainInput,
  type UpdateDomainInput,
} from './domains.rules.js';
import {
  cancelBackgroundVerification,
  createBackgroundVerificationJob,
  scheduleBackgroundVerification,
} from './domains.verify.jobs.js';
import { createDomainVerification } from './domains.verify.service.js';
import type { TxtResolver } from './txt-resolver.js';

export type { NewDomainInput, UpdateDomainInput } from './domains.rules.js';

/** network_details.network_info.ssl.status: a certificate of the install covers the name (or not). */
export type SslStatus = 'active' | 'expired' | 'none';

export interface DomainsDeps {
  db: Db;
  clock: Clock;
  installs: Pick<InstallsService, 'requireInstall' | 'lock' | 'setPrimaryDomain' | 'findById'>;
  resolver: TxtResolver;
  /** The domain of install cnames (`<install>.<installDomain>`); names under it are reserved. */
  installDomain: string;
  /** From the certificates module (its coverage part, which needs no domains service). */
  sslStatusOf: (
    installId: string,
    names: string[],
  ) => Promise<{ status: Map<string, SslStatus>; changesAt: number | null }>;
  /** Issue 21: every change of the install's domains is applied to the web server (routing module). */
  requestRouting: RequestRouting;
  /** Issue 22: the events of verification answers (domains.verify.service.ts). */
  events?: EventRecorder;
}

/** A domain row with what its record shows about the install: DNS targets and SSL status. */
export type DomainView = repo.DomainRow & { cname: string; a_records: string[]; ssl_status: SslStatus };

/** D7: an unguessable value (32 random bytes) for the TXT record. */
const newVerificationValue = () => `${VERIFICATION_VALUE_PREFIX}${randomBytes(32).toString('base64url')}`;

export function createDomainsService(deps: DomainsDeps) {
  const { db, installs, installDomain } = deps;

  /** The records of `rows`, and until when their SSL status holds (null: until a write). */
  async function viewsUntil(install: InstallRow, rows: repo.DomainRow[]) {
    const { status: ssl, changesAt } =
      rows.length > 0
        ? await deps.sslStatusOf(
            install.id,
            rows.map((r) => r.name),
          )
        : { status: new Map<string, SslStatus>(), changesAt: null };
    const views: DomainView[] = rows.map((row) => ({
      ...row,
      cname: `${install.name}.${installDomain}`,
      a_records: install.server_ipv4 ?? install.stable_ips ?? [],
      ssl_status: ssl.get(row.name) ?? 'none',
    }));
    return { views, validUntil: changesAt };
  }

  async function views(install: InstallRow, rows: repo.DomainRow[]): Promise<DomainView[]> {
    return (await viewsUntil(install, rows)).views;
  }

  async function viewOne(install: InstallRow, domainId: string): Promise<DomainView> {
    const row = await repo.findDomain(db, install.id, domainId);
    if (!row) throw Errors.notFound();
    const [view] = await views(install, [row]);
    if (!view) throw Errors.notFound();
    return view;
  }

  /** Locks the install for the transaction: domain changes of one install are serialised (D4, D5). */
  async function locked<T>(installId: string, fn: (tx: Db, install: InstallRow) => Promise<T>): Promise<T> {
    return withTransaction(db, async (tx) => {
      const install = await installs.lock(tx, installId);
      if (!install) throw Errors.notFound();
      return fn(tx, install);
    });
  }

  /** createDomain and createBulkDomains: all or nothing, every problem reported with its item's field. */
  async function addDomains(install: InstallRow, items: NewDomainInput[], prefix: (i: number) => string) {
    const errors: FieldError[] = [];
    const checked = items.map((item, i) => checkNewItem(item, prefix(i), installDomain, errors));
    checkBatch(checked, prefix, errors);
    const ids = await locked(install.id, async (tx, current) => {
      await checkAgainstDatabase(tx, install.id, checked, prefix, errors);
      if (errors.length > 0) throw batchFailure(errors, items.length);
      const primary = checked.find((c) => c?.primary);
      if (primary) {
        await repo.clearPrimary(tx, install.id);
        await installs.setPrimaryDomain(tx, install.id, primary.name);
      }
      await deps.requestRouting(tx, current);
      const added = await repo.insertDomains(
        tx,
        checked.flatMap((c) =>
          c
            ? [
                {
                  install_id: install.id,
                  name: c.name,
                  primary: c.primary,
                  redirect_to_id: c.redirect,
                  txt_verification_key: verificationRecordName(c.name),
                  txt_verification_value: newVerificationValue(),
                },
              ]
            : [],
        ),
      );
      // D7 in the background (decision 249): each new domain is looked up again on its own.
      await scheduleBackgroundVerification(tx, install.id, added, deps.clock.now());
      return added;
    });
    const rows = await repo.findDomainsByIds(db, ids);
    const byId = new Map(rows.map((r) => [r.id, r]));
    return views(
      install,
      ids.flatMap((id) => byId.get(id) ?? []),
    );
  }

  /** D3-D5 in the transaction (the install locked): the domain and what it would become. */
  async function checkedUpdate(tx: Db, installId: string, domainId: string, input: UpdateDomainInput) {
    const domain = await repo.findDomain(tx, installId, domainId);
    if (!domain) throw Errors.notFound();
    const next = await checkUpdate(tx, domain, input);
    const secure = input.secure_all_urls ?? domain.secure_all_urls;
    // What the install's server blocks carry (issue 21): a change of one re-applies its routing.
    const routed =
      next.primary !== domain.primary ||
      next.redirect !== domain.redirect_to_id ||
      secure !== domain.secure_all_urls;
    return { domain, next, routed };
  }

  const verify = createDomainVerification({ ...deps, locked });

  async function readable(caller: Caller, installId: string) {
    return installs.requireInstall(caller, installId, 'installs:read');
  }
  async function writable(caller: Caller, installId: string) {
    return installs.requireInstall(caller, installId, 'installs:operate');
  }

  return {
    /** D1 */
    async list(caller: Caller, installId: string, page: Page) {
      const install = await readable(caller, installId);
      const { count, rows } = await repo.listDomains(db, installId, page);
      const { views: records, validUntil } = await viewsUntil(install, rows);
      return { count, rows: records, validUntil };
    },

    /** D1 */
    async get(caller: Caller, installId: string, domainId: string) {
      return viewOne(await readable(caller, installId), domainId);
    },

    async create(caller: Caller, installId: string, input: NewDomainInput) {
      const install = await writable(caller, installId);
      const [view] = await addDomains(install, [input], () => '');
      if (!view) throw Errors.internal();
      return view;
    },

    async createBulk(caller: Caller, installId: string, items: NewDomainInput[]) {
      const install = await writable(caller, installId);
      return addDomains(install, items, (i) => `domains[${i}].`);
    },

    /** D2-D6: primary (switched atomically), redirect_to (or `nil`), secure_all_urls. */
    async update(caller: Caller, installId: string, domainId: string, input: UpdateDomainInput) {
      const install = await writable(caller, installId);
      await locked(installId, async (tx, current) => {
        const { domain, next, routed } = await checkedUpdate(tx, installId, domainId, input);
        if (routed) await deps.requestRouting(tx, current);
        if (next.primary && !domain.primary) {
          await repo.clearPrimary(tx, installId);
          await installs.setPrimaryDomain(tx, installId, domain.name);
        } else if (!next.primary && domain.primary) {
          await installs.setPrimaryDomain(tx, installId, null);
        }
        await repo.updateDomain(tx, domainId, {
          primary: next.primary,
          redirect_to_id: next.redirect,
          ...(input.secure_all_urls !== undefined && { secure_all_urls: input.secure_all_urls }),
        });
      });
      return viewOne(install, domainId);
    },

    /**
     * Issue 22, `?dry_run=true`: the checks of `update` (in a transaction that writes nothing) and
     * what it would change: the domain, the install's primary domain, the routing it would apply.
     */
    async updateDryRun(caller: Caller, installId: string, domainId: string, input: UpdateDomainInput) {
      await writable(caller, installId);
      return locked(installId, async (tx, current) => {
        const { domain, next, routed } = await checkedUpdate(tx, installId, domainId, input);
        const primaryAfter = next.primary
          ? domain.name
          : domain.primary
            ? `${current.name}.${installDomain}`
            : current.primary_domain;
        return {
          dry_run: true as const,
          install_id: installId,
          domain_id: domainId,
          name: domain.name,
          primary: { before: domain.primary, after: next.primary },
          redirect_to: { before: domain.redirect_to_id, after: next.redirect },
          secure_all_urls: {
            before: domain.secure_all_urls,
            after: input.secure_all_urls ?? domain.secure_all_urls,
          },
          primary_domain: { before: current.primary_domain, after: primaryAfter },
          operation: routed && routingApplies(current) ? ('apply_routing' as const) : null,
        };
      });
    },

    /** Refused (400) for the primary domain and for a redirect target: removing them would break traffic. */
    async remove(caller: Caller, installId: string, domainId: string) {
      await writable(caller, installId);
      await locked(installId, async (tx, current) => {
        const domain = await repo.findDomain(tx, installId, domainId);
        if (!domain) throw Errors.notFound();
        if (domain.primary) {
          const message = `${domain.name} is the install's primary domain; make another domain primary (or set primary to false) first`;
          throw invalid('domain_id', 'primary_domain', message);
        }
        const sources = await repo.redirectSources(tx, domainId);
        if (sources.length > 0) {
          const message = `${domain.name} is the redirect target of ${sources.join(', ')}; remove those redirects first`;
          throw invalid('domain_id', 'redirect_target', message);
        }
        await repo.deleteDomain(tx, domainId);
        await cancelBackgroundVerification(tx, domainId);
        await deps.requestRouting(tx, current);
      });
    },

    /** D7: verifyDomainTxtRecord (domains.verify.service.ts). */
    async verify(caller: Caller, installId: string, domainId: string) {
      const install = await writable(caller, installId);
      await verify(install, domainId);
      return viewOne(install, domainId);
    },

    /** The `verify_domain` job (domains.verify.jobs.ts): D7's lookup, in the background. */
    verifyJob: createBackgroundVerificationJob({
      db,
      clock: deps.clock,
      findInstall: (installId) => installs.findById(installId),
      verify,
    }),

    /** For jobs (no caller: the request was authorized when it was made): a domain of an install, or null. */
    record: (installId: string, domainId: string) => repo.findDomain(db, installId, domainId),

    /** Issue 21: at provisioning's end (its transaction), domains added while pending are routed. */
    async routeProvisioned(tx: Db, installId: string) {
      const install = await installs.lock(tx, installId);
      if (install && (await repo.hasDomains(tx, installId))) await deps.requestRouting(tx, install);
    },

    /** For the routing job (issue 21): the install's domains as the web server routes them. */
    routesOf: (installId: string) => repo.routesOf(db, installId),

    /** For the certificates module: the install's domain names, in creation order. */
    namesOf: (installId: string) => repo.domainNames(db, installId),

    /** For the certificates module: a domain of an install the caller may read (404 otherwise). */
    async find(caller: Caller, installId: string, domainId: string) {
      const install = await readable(caller, installId);
      const domain = await repo.findDomain(db, installId, domainId);
      if (!domain) throw Errors.notFound();
      return { install, domain };
    },
  };
}

export type DomainsService = ReturnType<typeof createDomainsService>;
