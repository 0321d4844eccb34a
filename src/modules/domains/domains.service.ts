import { randomBytes } from 'node:crypto';
import type { Caller } from '../../auth/access.js';
import type { Clock } from '../../clock.js';
import type { Db } from '../../db/client.js';
import { sqlState } from '../../db/errors.js';
import { withTransaction } from '../../db/transaction.js';
import { type AppError, Errors, type FieldError, type FieldErrorType } from '../../errors.js';
import type { Page } from '../../http/pagination.js';
import type { InstallRow } from '../installs/installs.repo.js';
import type { InstallsService } from '../installs/installs.service.js';
import {
  isWildcard,
  normalizeDomainName,
  txtRecordsMatch,
  VERIFICATION_VALUE_PREFIX,
  verificationBase,
  verificationRecordName,
} from './domain-name.js';
import * as repo from './domains.repo.js';
import { lookupTxt, type TxtResolver } from './txt-resolver.js';

/** network_details.network_info.ssl.status: a certificate of the install covers the name (or not). */
export type SslStatus = 'active' | 'expired' | 'none';

export interface DomainsDeps {
  db: Db;
  clock: Clock;
  installs: Pick<InstallsService, 'requireInstall' | 'lockInstall' | 'setPrimaryDomain'>;
  resolver: TxtResolver;
  /** The domain of install cnames (`<install>.<installDomain>`); names under it are reserved. */
  installDomain: string;
  /** From the certificates module (wired lazily: it depends on this service too). */
  sslStatusOf: (installId: string, names: string[]) => Promise<Map<string, SslStatus>>;
}

/** A domain row with what its record shows about the install: DNS targets and SSL status. */
export type DomainView = repo.DomainRow & { cname: string; a_records: string[]; ssl_status: SslStatus };

export interface NewDomainInput {
  name: string;
  primary?: boolean;
  /** A domain id of the same install; `nil` (or absent) for none. */
  redirect_to?: string;
}

export interface UpdateDomainInput {
  primary?: boolean;
  redirect_to?: string;
  secure_all_urls?: boolean;
}

const RESOURCE = 'domain';
const field = (path: string, type: FieldErrorType, code: string, message: string): FieldError => ({
  resource: RESOURCE,
  field: path,
  type,
  code,
  message,
});
const invalid = (path: string, code: string, message: string) =>
  Errors.invalidValue(RESOURCE, path, message, code);

/** D7: an unguessable value (32 random bytes) for the TXT record. */
const newVerificationValue = () => `${VERIFICATION_VALUE_PREFIX}${randomBytes(32).toString('base64url')}`;

export function createDomainsService(deps: DomainsDeps) {
  const { db, clock, installs, resolver, installDomain } = deps;

  async function views(install: InstallRow, rows: repo.DomainRow[]): Promise<DomainView[]> {
    const ssl =
      rows.length > 0
        ? await deps.sslStatusOf(
            install.id,
            rows.map((r) => r.name),
          )
        : new Map();
    return rows.map((row) => ({
      ...row,
      cname: `${install.name}.${installDomain}`,
      a_records: install.stable_ips ?? [],
      ssl_status: ssl.get(row.name) ?? 'none',
    }));
  }

  /** Outside transactions only: the SSL status comes from another module's queries on `db`. */
  async function viewOne(install: InstallRow, domainId: string): Promise<DomainView> {
    const row = await repo.findDomain(db, install.id, domainId);
    if (!row) throw Errors.notFound();
    const [view] = await views(install, [row]);
    if (!view) throw Errors.notFound();
    return view;
  }

  /** Locks the install for the transaction: domain changes of one install are serialised (D4, D5). */
  async function locked<T>(installId: string, fn: (tx: Db) => Promise<T>): Promise<T> {
    return withTransaction(db, async (tx) => {
      if (!(await installs.lockInstall(tx, installId))) throw Errors.notFound();
      return fn(tx);
    });
  }

  /** Rules on one new domain that need no database; `at` prefixes field names (`domains[3].`). */
  function checkItem(item: NewDomainInput, at: string, errors: FieldError[]) {
    const result = normalizeDomainName(item.name, installDomain);
    if (!result.ok) {
      errors.push(field(`${at}name`, 'invalid_value', result.code, result.message));
      return null;
    }
    const redirect = item.redirect_to && item.redirect_to !== 'nil' ? item.redirect_to : null;
    if (item.primary && result.wildcard) {
      errors.push(
        field(
          `${at}primary`,
          'invalid_value',
          'wildcard_cannot_be_primary',
          'A wildcard domain cannot be primary',
        ),
      );
    }
    if (item.primary && redirect) {
      errors.push(
        field(
          `${at}primary`,
          'invalid_value',
          'redirected_cannot_be_primary',
          'A redirected domain cannot be primary',
        ),
      );
    }
    return { name: result.name, primary: item.primary === true, redirect };
  }

  /** D5: a new domain may redirect to a domain of the same install that does not redirect itself. */
  async function checkRedirectTarget(tx: Db, installId: string, targetId: string, at: string) {
    const target = await repo.findDomain(tx, installId, targetId);
    if (!target) {
      return field(
        `${at}redirect_to`,
        'invalid_value',
        'redirect_target_not_found',
        `Domain ${targetId} is not a domain of this install`,
      );
    }
    if (target.redirect_to_id) {
      return field(
        `${at}redirect_to`,
        'invalid_value',
        'redirect_chain',
        `${target.name} itself redirects to ${target.redirect_to_name} (no redirect chains or loops)`,
      );
    }
    if (isWildcard(target.name)) {
      return field(
        `${at}redirect_to`,
        'invalid_value',
        'redirect_to_wildcard',
        `${target.name} is a wildcard and cannot be a redirect target`,
      );
    }
    return null;
  }

  /** createDomain and createBulkDomains: all or nothing, every problem reported with its item's field. */
  async function addDomains(install: InstallRow, items: NewDomainInput[], prefix: (i: number) => string) {
    const errors: FieldError[] = [];
    const checked = items.map((item, i) => checkItem(item, prefix(i), errors));
    const seen = new Set<string>();
    checked.forEach((c, i) => {
      if (!c) return;
      if (seen.has(c.name)) {
        errors.push(
          field(
            `${prefix(i)}name`,
            'value_unavailable',
            'domain_exists',
            `${c.name} is listed more than once`,
          ),
        );
      }
      seen.add(c.name);
    });
    const primaries = checked.flatMap((c, i) => (c?.primary ? [i] : []));
    for (const i of primaries.slice(1)) {
      errors.push(
        field(
          `${prefix(i)}primary`,
          'invalid_value',
          'multiple_primary',
          'Only one domain can be primary (D4)',
        ),
      );
    }
    const names = checked.flatMap((c) => (c ? [c.name] : []));
    const ids = await locked(install.id, async (tx) => {
      const existing = await repo.namesOfInstall(tx, install.id, names);
      const verified = await repo.verifiedNames(tx, names);
      for (const [i, c] of checked.entries()) {
        if (!c) continue;
        if (existing.has(c.name)) {
          const message = `${c.name} is already a domain of this install`;
          errors.push(field(`${prefix(i)}name`, 'value_unavailable', 'domain_exists', message));
        } else if (c.primary && verified.has(c.name)) {
          const message = `${c.name} is verified on another install: this record is a duplicate and cannot be primary`;
          errors.push(field(`${prefix(i)}primary`, 'invalid_value', 'duplicate_cannot_be_primary', message));
        }
        const problem = c.redirect ? await checkRedirectTarget(tx, install.id, c.redirect, prefix(i)) : null;
        if (problem) errors.push(problem);
      }
      if (errors.length > 0) throw failure(errors, items.length);
      const primary = checked.find((c) => c?.primary);
      if (primary) {
        await repo.clearPrimary(tx, install.id);
        await installs.setPrimaryDomain(tx, install.id, primary.name);
      }
      return repo.insertDomains(
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
    });
    const rows = await repo.findDomainsByIds(db, ids);
    const byId = new Map(rows.map((r) => [r.id, r]));
    return views(
      install,
      ids.flatMap((id) => byId.get(id) ?? []),
    );
  }

  function failure(errors: FieldError[], total: number): AppError {
    if (total === 1 || errors.length === 1)
      return Errors.badRequest(errors[0]?.message ?? 'Invalid domain', errors);
    const items = new Set(errors.map((e) => e.field.replace(/\].*$/, ']'))).size;
    return Errors.badRequest(`${items} of ${total} domains are invalid; none was added`, errors);
  }

  /** D2-D5: the checks of updateDomain that compare the domain with its new state. */
  async function checkUpdate(tx: Db, domain: repo.DomainRow, input: UpdateDomainInput) {
    let redirect = domain.redirect_to_id;
    if (input.redirect_to !== undefined && input.redirect_to !== 'nil') {
      if (input.redirect_to === domain.id) {
        throw invalid('redirect_to', 'redirect_loop', `${domain.name} cannot redirect to itself`);
      }
      const problem = await checkRedirectTarget(tx, domain.install_id, input.redirect_to, '');
      if (problem) throw Errors.badRequest(problem.message, [problem]);
      const sources = await repo.redirectSources(tx, domain.id);
      if (sources.length > 0) {
        const message = `${sources.join(', ')} redirect to ${domain.name}; it cannot redirect in turn (no redirect chains or loops)`;
        throw invalid('redirect_to', 'redirect_chain', message);
      }
      redirect = input.redirect_to;
    } else if (input.redirect_to === 'nil') {
      redirect = null;
    }
    const primary = input.primary ?? domain.primary;
    if (input.primary === true && !domain.primary) {
      // D3: a duplicate, wildcard or redirected domain cannot be made primary.
      if (domain.duplicate) {
        const message = `${domain.name} is verified on another install: this record is a duplicate and cannot be primary`;
        throw invalid('primary', 'duplicate_cannot_be_primary', message);
      }
      if (isWildcard(domain.name)) {
        throw invalid('primary', 'wildcard_cannot_be_primary', 'A wildcard domain cannot be primary');
      }
    }
    if (primary && redirect) {
      if (input.primary === true) {
        throw invalid(
          'primary',
          'redirected_cannot_be_primary',
          `${domain.name} redirects and cannot be primary`,
        );
      }
      throw invalid(
        'redirect_to',
        'primary_cannot_redirect',
        `${domain.name} is the primary domain and cannot redirect; make another domain primary first`,
      );
    }
    return { primary, redirect };
  }

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
      return { count, rows: await views(install, rows) };
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
      await locked(installId, async (tx) => {
        const domain = await repo.findDomain(tx, installId, domainId);
        if (!domain) throw Errors.notFound();
        const next = await checkUpdate(tx, domain, input);
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

    /** Refused (400) for the primary domain and for a redirect target: removing them would break traffic. */
    async remove(caller: Caller, installId: string, domainId: string) {
      await writable(caller, installId);
      await locked(installId, async (tx) => {
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
      });
    },

    /**
     * D7: looks the TXT record up now. A match verifies the domain; no record (or another value)
     * leaves it pending and answers the domain as it is. DNS failures are 503/502 and change nothing.
     */
    async verify(caller: Caller, installId: string, domainId: string) {
      const install = await writable(caller, installId);
      const domain = await repo.findDomain(db, installId, domainId);
      if (!domain) throw Errors.notFound();
      if (domain.ownership_status === 'TXT_VERIFIED' || !domain.txt_verification_value) {
        return viewOne(install, domainId);
      }
      if (domain.duplicate) {
        throw Errors.valueUnavailable(
          RESOURCE,
          'name',
          `${domain.name} is already verified on another install`,
          'domain_verified_elsewhere',
        );
      }
      // Outside any transaction: a DNS lookup can take seconds (style rule 5).
      const records = await lookupTxt(resolver, verificationRecordName(domain.name));
      if (!txtRecordsMatch(records, domain.txt_verification_value)) return viewOne(install, domainId);
      try {
        await locked(installId, async (tx) => {
          const current = await repo.findDomain(tx, installId, domainId);
          if (!current) throw Errors.notFound();
          // Verified (or deleted and re-made) meanwhile: nothing left to do.
          if (current.txt_verification_value !== domain.txt_verification_value) return;
          await repo.updateDomain(tx, domainId, {
            ownership_status: 'TXT_VERIFIED',
            txt_verified_time: clock.now(),
            txt_verified_domain: verificationBase(domain.name),
            txt_verification_key: null,
            txt_verification_value: null,
          });
          for (const other of await repo.demoteDuplicates(tx, domain.name, domainId)) {
            await installs.setPrimaryDomain(tx, other, null);
          }
        });
      } catch (err) {
        const state = sqlState(err);
        if (state?.code === '23505' && state.constraint === 'domains_verified_name_key') {
          throw Errors.valueUnavailable(
            RESOURCE,
            'name',
            `${domain.name} is already verified on another install`,
            'domain_verified_elsewhere',
          );
        }
        throw err;
      }
      return viewOne(install, domainId);
    },

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
