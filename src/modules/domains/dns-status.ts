import { Resolver } from 'node:dns/promises';
import type { Config } from '../../config.js';
import { isWildcard } from './domain-name.js';

/** The lookups a domain status report makes (node:dns `Resolver` has them; tests may pass their own). */
export interface StatusResolver {
  resolve4(name: string): Promise<string[]>;
  resolve6(name: string): Promise<string[]>;
  resolveCname(name: string): Promise<string[]>;
}

/** A dedicated resolver on DNS_SERVERS (or the system's), like the TXT one of verification (D7). */
export function createStatusResolver(dns: Config['dns']): StatusResolver {
  const resolver = new Resolver({ timeout: dns.timeoutMs, tries: dns.tries });
  if (dns.servers.length > 0) resolver.setServers([...dns.servers]);
  return resolver;
}

/** A wildcard has no records of its own: an arbitrary name under it is asked instead. */
export const WILDCARD_PROBE_LABEL = 'hostplane-wildcard-probe';

export const probeName = (name: string) =>
  isWildcard(name) ? `${WILDCARD_PROBE_LABEL}.${name.slice(2)}` : name;

/** `pointed`: at the install; `not_pointed`: elsewhere; `not_found`: no address; `dns_error`: no answer. */
export type PointingResult = 'pointed' | 'not_pointed' | 'not_found' | 'dns_error';

/** The reference's DomainStatus, as far as DNS tells (no HTTP probe is made). */
export interface DomainStatus {
  name: string;
  install_name: string;
  complete: boolean;
  result?: PointingResult;
  dns_error?: boolean;
  cname?: string;
  a_record?: string;
  aaaa_record?: string;
  ip?: string[];
  address?: string[];
}

// The name or the record type does not exist: an answer, not a failure.
const ABSENT = new Set(['ENOTFOUND', 'ENODATA']);

/** A lookup that answers [] for "no such record" and throws (with the code) for a failed lookup. */
async function records(lookup: () => Promise<string[]>): Promise<string[]> {
  try {
    return await lookup();
  } catch (err) {
    const code = String((err as NodeJS.ErrnoException).code ?? 'EUNKNOWN');
    if (ABSENT.has(code)) return [];
    throw Object.assign(new Error(`DNS lookup failed (${code})`), { code });
  }
}

const clean = (host: string) => host.toLowerCase().replace(/\.$/, '');

/**
 * Where the domain points: its CNAME, A and AAAA records through the configured resolvers. It points
 * at the install when its CNAME is the install's cname, or when it has A records and every one is a
 * stable IP of the install. Throws when a lookup fails (timeout, SERVFAIL, refused): the job retries.
 */
export async function checkPointing(
  resolver: StatusResolver,
  domain: string,
  install: { name: string; cname: string; stable_ips: string[] },
): Promise<DomainStatus> {
  const name = probeName(domain);
  const [cnames, a, aaaa] = await Promise.all([
    records(() => resolver.resolveCname(name)),
    records(() => resolver.resolve4(name)),
    records(() => resolver.resolve6(name)),
  ]);
  const cname = cnames[0] ? clean(cnames[0]) : undefined;
  const addresses = [...a, ...aaaa];
  const viaCname = cname === clean(install.cname);
  const viaA = a.length > 0 && a.every((ip) => install.stable_ips.includes(ip));
  const result: PointingResult =
    viaCname || viaA ? 'pointed' : cname || addresses.length > 0 ? 'not_pointed' : 'not_found';
  return {
    name: domain,
    install_name: install.name,
    complete: true,
    result,
    dns_error: false,
    ...(cname && { cname }),
    ...(a[0] && { a_record: a[0] }),
    ...(aaaa[0] && { aaaa_record: aaaa[0] }),
    ip: addresses,
    address: addresses,
  };
}

/** The status recorded when every attempt's lookups failed. */
export const dnsFailure = (domain: string, installName: string): DomainStatus => ({
  name: domain,
  install_name: installName,
  complete: true,
  result: 'dns_error',
  dns_error: true,
  ip: [],
  address: [],
});
