import type { Db } from '../../db/client.js';
import { type AppError, Errors, type FieldError, type FieldErrorType } from '../../errors.js';
import { isWildcard, normalizeDomainName } from './domain-name.js';
import * as repo from './domains.repo.js';

/** The checks of createDomain, createBulkDomains and updateDomain (D3-D5), with their G7 errors. */

export const RESOURCE = 'domain';

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

export const fieldError = (
  path: string,
  type: FieldErrorType,
  code: string,
  message: string,
): FieldError => ({
  resource: RESOURCE,
  field: path,
  type,
  code,
  message,
});

export const invalid = (path: string, code: string, message: string) =>
  Errors.invalidValue(RESOURCE, path, message, code);

const duplicateMessage = (name: string) =>
  `${name} is verified on another install: this record is a duplicate and cannot be primary`;

export interface CheckedItem {
  name: string;
  primary: boolean;
  redirect: string | null;
}

/** One new domain, without the database: its name, and D3 for wildcards and redirects. */
export function checkNewItem(
  item: NewDomainInput,
  at: string,
  installDomain: string,
  errors: FieldError[],
): CheckedItem | null {
  const result = normalizeDomainName(item.name, installDomain);
  if (!result.ok) {
    errors.push(fieldError(`${at}name`, 'invalid_value', result.code, result.message));
    return null;
  }
  const redirect = item.redirect_to && item.redirect_to !== 'nil' ? item.redirect_to : null;
  if (item.primary && result.wildcard) {
    const message = 'A wildcard domain cannot be primary';
    errors.push(fieldError(`${at}primary`, 'invalid_value', 'wildcard_cannot_be_primary', message));
  }
  if (item.primary && redirect) {
    const message = 'A redirected domain cannot be primary';
    errors.push(fieldError(`${at}primary`, 'invalid_value', 'redirected_cannot_be_primary', message));
  }
  return { name: result.name, primary: item.primary === true, redirect };
}

/** Within one request: no name twice, at most one primary (D4). */
export function checkBatch(
  checked: (CheckedItem | null)[],
  prefix: (i: number) => string,
  errors: FieldError[],
) {
  const seen = new Set<string>();
  let primaries = 0;
  checked.forEach((c, i) => {
    if (!c) return;
    if (seen.has(c.name)) {
      const message = `${c.name} is listed more than once`;
      errors.push(fieldError(`${prefix(i)}name`, 'value_unavailable', 'domain_exists', message));
    }
    seen.add(c.name);
    if (c.primary && ++primaries > 1) {
      const message = 'Only one domain can be primary (D4)';
      errors.push(fieldError(`${prefix(i)}primary`, 'invalid_value', 'multiple_primary', message));
    }
  });
}

/** Against the install's domains and the platform's verified names (G12: a taken name is a 400). */
export async function checkAgainstDatabase(
  tx: Db,
  installId: string,
  checked: (CheckedItem | null)[],
  prefix: (i: number) => string,
  errors: FieldError[],
) {
  const names = checked.flatMap((c) => (c ? [c.name] : []));
  const existing = await repo.namesOfInstall(tx, installId, names);
  const verified = await repo.verifiedNames(tx, names);
  for (const [i, c] of checked.entries()) {
    if (!c) continue;
    if (existing.has(c.name)) {
      const message = `${c.name} is already a domain of this install`;
      errors.push(fieldError(`${prefix(i)}name`, 'value_unavailable', 'domain_exists', message));
    } else if (c.primary && verified.has(c.name)) {
      errors.push(
        fieldError(
          `${prefix(i)}primary`,
          'invalid_value',
          'duplicate_cannot_be_primary',
          duplicateMessage(c.name),
        ),
      );
    }
    const problem = c.redirect ? await checkRedirectTarget(tx, installId, c.redirect, prefix(i)) : null;
    if (problem) errors.push(problem);
  }
}

/** The 400 of a refused create: one item's message, or how many items of the batch are wrong. */
export function batchFailure(errors: FieldError[], total: number): AppError {
  if (total === 1) return Errors.badRequest(errors[0]?.message ?? 'Invalid domain', errors);
  const items = new Set(errors.map((e) => e.field.replace(/\].*$/, ']'))).size;
  return Errors.badRequest(`${items} of ${total} domains are invalid; none was added`, errors);
}

/** D5: a redirect target is a domain of the same install that neither redirects nor is a wildcard. */
export async function checkRedirectTarget(
  tx: Db,
  installId: string,
  targetId: string,
  at: string,
): Promise<FieldError | null> {
  const target = await repo.findDomain(tx, installId, targetId);
  const path = `${at}redirect_to`;
  if (!target) {
    const message = `Domain ${targetId} is not a domain of this install`;
    return fieldError(path, 'invalid_value', 'redirect_target_not_found', message);
  }
  if (target.redirect_to_id) {
    const message = `${target.name} itself redirects to ${target.redirect_to_name} (no redirect chains or loops)`;
    return fieldError(path, 'invalid_value', 'redirect_chain', message);
  }
  if (isWildcard(target.name)) {
    const message = `${target.name} is a wildcard and cannot be a redirect target`;
    return fieldError(path, 'invalid_value', 'redirect_to_wildcard', message);
  }
  return null;
}

/** D2-D5: the new primary flag and redirect of an updated domain, or a 400 naming the conflict (G12). */
export async function checkUpdate(tx: Db, domain: repo.DomainRow, input: UpdateDomainInput) {
  let redirect = domain.redirect_to_id;
  if (input.redirect_to === 'nil') {
    redirect = null;
  } else if (input.redirect_to !== undefined) {
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
  }
  const primary = input.primary ?? domain.primary;
  if (input.primary === true && !domain.primary) {
    // D3: a duplicate, wildcard or redirected domain cannot be made primary.
    if (domain.duplicate)
      throw invalid('primary', 'duplicate_cannot_be_primary', duplicateMessage(domain.name));
    if (isWildcard(domain.name)) {
      throw invalid('primary', 'wildcard_cannot_be_primary', 'A wildcard domain cannot be primary');
    }
  }
  if (primary && redirect) {
    if (input.primary === true) {
      const message = `${domain.name} redirects and cannot be primary`;
      throw invalid('primary', 'redirected_cannot_be_primary', message);
    }
    const message = `${domain.name} is the primary domain and cannot redirect; make another domain primary first`;
    throw invalid('redirect_to', 'primary_cannot_redirect', message);
  }
  return { primary, redirect };
}
