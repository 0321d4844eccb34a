/**
 * What a transfer needs of its site, its destination and its own status: checked when it is requested
 * (site-transfers.service.ts) and again when it runs (site-transfers.run.service.ts), since the rules
 * may change in between.
 */

/** A transfer starts, and can still be cancelled, only from these statuses (T9). */
export const STARTABLE = new Set(['pending', 'scheduled']);

/** Why a transfer may not start on this site now (T4, T7), or null. */
export function siteProblem(site: { id: string; sandbox: boolean; transferable: boolean }): string | null {
  if (site.sandbox) return `Site ${site.id} is a sandbox site; sandbox sites cannot be transferred`;
  if (!site.transferable) return `Site ${site.id} is not transferable`;
  return null;
}

/** Why an account may not receive sites (T5, T7), or null. */
export function destinationProblem(
  account: { id: string; sites_enabled: boolean; preferred_data_center: string | null } | null,
  id: string,
): string | null {
  if (!account) return `Destination account ${id} no longer exists`;
  if (!account.preferred_data_center) {
    return `Destination account ${id} has no preferred data center configured; it cannot receive sites`;
  }
  if (!account.sites_enabled) return `Destination account ${id} does not have sites enabled`;
  return null;
}
