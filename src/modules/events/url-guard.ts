import { lookup } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';

/**
 * Issue 22: webhook URLs are not a way in. An address is refused when it is loopback, private
 * (RFC 1918, CGNAT, fc00::/7), link-local (169.254/16 with the metadata address, fe80::/10), the
 * metadata address of IPv6 (fd00:ec2::254, inside fc00::/7), unspecified, multicast, broadcast or
 * reserved; an IPv4-mapped IPv6 address is judged by its IPv4 address.
 */
const blocked = new BlockList();
for (const [net, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const)
  blocked.addSubnet(net, prefix, 'ipv4');
for (const [net, prefix] of [
  ['::', 128],
  ['::1', 128],
  ['64:ff9b::', 96],
  ['100::', 64],
  ['fc00::', 7],
  ['fe80::', 10],
  ['fec0::', 10],
  ['ff00::', 8],
] as const)
  blocked.addSubnet(net, prefix, 'ipv6');

/** Why an address may not be a webhook target, or null when it is public. */
export function refusedAddress(address: string): string | null {
  const family = isIP(address);
  if (family === 0) return 'not an IP address';
  if (family === 6) {
    const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
    if (mapped?.[1]) return refusedAddress(mapped[1]);
    return blocked.check(address, 'ipv6') ? 'a loopback, private, link-local or reserved IPv6 address' : null;
  }
  return blocked.check(address, 'ipv4') ? 'a loopback, private, link-local or reserved IPv4 address' : null;
}

export class TargetRefused extends Error {
  /** `unresolved`: the name has no address; `address`: an address it resolves to is refused. */
  constructor(
    message: string,
    readonly reason: 'unresolved' | 'address' = 'address',
  ) {
    super(message);
  }
}

export interface ResolvedTarget {
  address: string;
  family: 4 | 6;
}

/**
 * Resolves `hostname` and answers the address to connect to, after checking every address it
 * resolves to (one refused address refuses the name: a rebinding answer cannot slip one in).
 * `allowPrivate` (WEBHOOK_ALLOW_PRIVATE_TARGETS) skips the check.
 */
export async function resolveTarget(hostname: string, allowPrivate: boolean): Promise<ResolvedTarget> {
  const bare = hostname.startsWith('[') && hostname.endsWith(']') ? hostname.slice(1, -1) : hostname;
  let addresses: { address: string; family: number }[];
  if (isIP(bare)) addresses = [{ address: bare, family: isIP(bare) }];
  else {
    try {
      addresses = await lookup(bare, { all: true, verbatim: true });
    } catch (err) {
      throw new TargetRefused(
        `${bare} does not resolve (${(err as NodeJS.ErrnoException).code ?? 'error'})`,
        'unresolved',
      );
    }
  }
  if (addresses.length === 0) throw new TargetRefused(`${bare} does not resolve`, 'unresolved');
  if (!allowPrivate) {
    for (const a of addresses) {
      const why = refusedAddress(a.address);
      if (why) throw new TargetRefused(`${bare} resolves to ${a.address}, ${why}`);
    }
  }
  const first = addresses[0] as { address: string; family: number };
  return { address: first.address, family: first.family === 6 ? 6 : 4 };
}

/** A webhook URL's shape: http(s), a host, no credentials, bounded. Answers the parsed URL or why not. */
export function parseTargetUrl(raw: string): URL | string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return 'is not a URL';
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return 'must be an http or https URL';
  if (url.username || url.password) return 'must not carry credentials';
  if (!url.hostname) return 'has no host';
  if (url.hash) return 'must not have a fragment';
  return url;
}
