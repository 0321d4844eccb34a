import type { HostplaneClient } from '@hostplane/client';
import { CliError, EXIT } from './exit-codes.js';

/**
 * Issue 29 (defect 10): installs, sites and accounts are named the way people name them. An argument
 * shaped like a UUID is an id and goes to the API as it is; anything else is a name, looked up in the
 * lists the credential sees (GET /v1/installs, /v1/sites, /v1/accounts). Install names are unique;
 * a site or account name that more than one record carries is refused with the candidates' ids.
 */

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export const isUuid = (value: string) => UUID.test(value);

interface Named {
  id: string;
  name: string;
}

/** The one id `matches` holds, or a clear error: none (exit 4), or several, listed (exit 2). */
export function pickOne<T extends Named>(
  kind: string,
  given: string,
  matches: T[],
  describe: (record: T) => string,
): string {
  const [only] = matches;
  if (only && matches.length === 1) return only.id;
  if (matches.length === 0)
    throw new CliError(
      `No ${kind} named "${given}" is visible to this credential (give its name or its id; list them with: hostplane-cli ${kind}s list)`,
      EXIT.notFound,
    );
  const lines = matches.map((m) => `  ${m.id}  ${describe(m)}`).join('\n');
  throw new CliError(
    `${matches.length} ${kind}s are named "${given}": give the id of the one you mean:\n${lines}`,
    EXIT.usage,
  );
}

export interface Resolver {
  install(ref: string): Promise<string>;
  site(ref: string): Promise<string>;
  account(ref: string): Promise<string>;
}

/** Resolves names through the API; each list is read at most once per command. */
export function createResolver(hp: HostplaneClient): Resolver {
  let installs: Promise<(Named & { environment: string | null; site: { id: string } | null })[]> | null =
    null;
  let sites: Promise<(Named & { account: { id: string; name?: string } })[]> | null = null;
  let accounts: Promise<(Named & { nickname?: string | null })[]> | null = null;
  const allInstalls = () => {
    installs ??= hp.listAll((page) => hp.get('/v1/installs', { params: { query: page } }));
    return installs;
  };
  const allSites = () => {
    sites ??= hp.listAll((page) => hp.get('/v1/sites', { params: { query: page } }));
    return sites;
  };
  const allAccounts = () => {
    accounts ??= hp.listAll((page) => hp.get('/v1/accounts', { params: { query: page } }));
    return accounts;
  };
  return {
    async install(ref) {
      if (isUuid(ref)) return ref;
      const matches = (await allInstalls()).filter((i) => i.name === ref);
      return pickOne('install', ref, matches, (i) => `${i.environment ?? '-'} (site ${i.site?.id ?? '-'})`);
    },
    async site(ref) {
      if (isUuid(ref)) return ref;
      const matches = (await allSites()).filter((s) => s.name === ref);
      return pickOne('site', ref, matches, (s) => `of account ${s.account.name ?? s.account.id}`);
    },
    async account(ref) {
      if (isUuid(ref)) return ref;
      const all = await allAccounts();
      const byName = all.filter((a) => a.name === ref);
      // A nickname is a name people use too, when no account carries it as its name.
      const matches = byName.length > 0 ? byName : all.filter((a) => a.nickname === ref);
      return pickOne('account', ref, matches, (a) => a.nickname ?? '');
    },
  };
}
