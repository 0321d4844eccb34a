import { lookup, Resolver } from 'node:dns/promises';
import { isIP } from 'node:net';

/**
 * Issue 22, issue 28 finding 10, issue 29 defect 3: webhook URLs are not a way in. An address is
 * refused when it is loopback, private (RFC 1918, CGNAT, fc00::/7), link-local (169.254/16 with the
 * metadata address, fe80::/10), the metadata address of IPv6 (fd00:ec2::254), unspecified,
 * multicast, broadcast or reserved, or when it embeds or reaches such an IPv4 address: IPv4-mapped
 * (::ffff:0:0/96), IPv4-compatible (::/96), SIIT-translated (::ffff:0:0:0/96), NAT64 (64:ff9b::/96,
 * judged by the IPv4 inside), 6to4 (2002::/16) and Teredo (2001::/32: its server and its client).
 * The NAT64 local-use prefix (64:ff9b:1::/48) is refused whole (where the IPv4 sits depends on a
 * prefix length only the network knows), as are zone-scoped addresses (`fe80::1%eth0`).
 *
 * WEBHOOK_ALLOWED_NETWORKS opens networks (CIDRs) the operator names, but never link-local or a
 * metadata address through a wider entry: an address in 169.254.0.0/16 or fe80::/10 passes only
 * through an entry inside that range, and 169.254.169.254 and fd00:ec2::254 only through an entry
 * naming exactly that address (docs/decisions.md #143).
 */

/** A network: its address as bytes (4 or 16) and prefix length. */
export interface Network {
  readonly bytes: Uint8Array;
  readonly prefix: number;
}

function ipv4Bytes(text: string): Uint8Array | null {
  const parts = text.split('.');
  if (parts.length !== 4 || !parts.every((p) => /^\d{1,3}$/.test(p) && Number(p) <= 255)) return null;
  return Uint8Array.from(parts.map(Number));
}

/** The 16 bytes of an IPv6 address (with a dotted IPv4 tail or not); null when it is not one. */
function ipv6Bytes(text: string): Uint8Array | null {
  if (isIP(text) !== 6) return null;
  let tail: number[] = [];
  let head = text;
  const dotted = /^(.*:)(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted?.[1] && dotted[2]) {
    const v4 = ipv4Bytes(dotted[2]);
    if (!v4) return null;
    const [a = 0, b = 0, c = 0, d = 0] = v4;
    tail = [(a << 8) | b, (c << 8) | d];
    head = dotted[1].endsWith('::') ? dotted[1] : dotted[1].slice(0, -1);
  }
  const groups = (s: string) => (s === '' ? [] : s.split(':').map((g) => Number.parseInt(g, 16)));
  const [left = '', right] = head.split('::');
  const l = groups(left);
  const r = right === undefined ? [] : groups(right);
  const fill = 8 - l.length - r.length - tail.length;
  const words = [...l, ...(right === undefined ? [] : new Array<number>(fill).fill(0)), ...r, ...tail];
  if (words.length !== 8) return null;
  const bytes = new Uint8Array(16);
  words.forEach((w, i) => {
    bytes[2 * i] = w >> 8;
    bytes[2 * i + 1] = w & 0xff;
  });
  return bytes;
}

const bytesOf = (address: string) => ipv4Bytes(address) ?? ipv6Bytes(address);

/** `a.b.c.d/n`, `x::y/n`, or a bare address (/32, /128); null when it is not one. */
export function parseNetwork(text: string): Network | null {
  const [address = '', prefix, extra] = text.trim().split('/');
  const bytes = bytesOf(address);
  if (!bytes || extra !== undefined) return null;
  const bits = bytes.length * 8;
  if (prefix === undefined) return { bytes, prefix: bits };
  if (!/^\d{1,3}$/.test(prefix) || Number(prefix) > bits) return null;
  return { bytes, prefix: Number(prefix) };
}

function contains(net: Network, bytes: Uint8Array): boolean {
  if (net.bytes.length !== bytes.length) return false;
  for (let bit = 0; bit < net.prefix; bit += 8) {
    const width = Math.min(8, net.prefix - bit);
    const mask = (0xff << (8 - width)) & 0xff;
    const i = bit / 8;
    if (((net.bytes[i] as number) & mask) !== ((bytes[i] as number) & mask)) return false;
  }
  return true;
}

/** `inner` lies wholly inside `outer`. */
const within = (inner: Network, outer: Network) =>
  inner.prefix >= outer.prefix && contains(outer, inner.bytes);

const nets = (list: string[]) => list.map((n) => parseNetwork(n) as Network);

/** Never public, in the order the reasons name them. */
const REFUSED: { what: string; networks: Network[] }[] = [
  { what: 'a cloud metadata address', networks: nets(['169.254.169.254/32', 'fd00:ec2::254/128']) },
  { what: 'a link-local address', networks: nets(['169.254.0.0/16', 'fe80::/10']) },
  { what: 'a loopback address', networks: nets(['127.0.0.0/8', '::1/128']) },
  {
    what: 'a private address',
    networks: nets(['10.0.0.0/8', '100.64.0.0/10', '172.16.0.0/12', '192.168.0.0/16', 'fc00::/7']),
  },
  { what: 'a NAT64 local-use address', networks: nets(['64:ff9b:1::/48']) },
  {
    what: 'an unspecified, multicast, broadcast or reserved address',
    networks: nets([
      '0.0.0.0/8',
      '192.0.0.0/24',
      '198.18.0.0/15',
      '224.0.0.0/4',
      '240.0.0.0/4',
      '::/128',
      '100::/64',
      'fec0::/10',
      'ff00::/8',
    ]),
  },
];

/**
 * What an entry of WEBHOOK_ALLOWED_NETWORKS must lie inside to let such an address through: link-local
 * addresses only through a link-local entry, a metadata address only through an entry of exactly it.
 */
const NAMED_ONLY = nets(['169.254.169.254/32', 'fd00:ec2::254/128', '169.254.0.0/16', 'fe80::/10']);

/** WEBHOOK_ALLOWED_NETWORKS, parsed: the networks a webhook may reach besides public addresses. */
export interface TargetPolicy {
  readonly allowed: readonly Network[];
}

export const PUBLIC_ONLY: TargetPolicy = { allowed: [] };

/** The policy of WEBHOOK_ALLOWED_NETWORKS (CIDRs checked by config.ts; a bad one throws). */
export function targetPolicy(cidrs: readonly string[]): TargetPolicy {
  return {
    allowed: cidrs.map((c) => {
      const net = parseNetwork(c);
      if (!net) throw new Error(`not a network: ${c}`);
      return net;
    }),
  };
}

function allowedBy(policy: TargetPolicy, bytes: Uint8Array): boolean {
  const guarded = NAMED_ONLY.filter((g) => contains(g, bytes));
  return policy.allowed.some((n) => contains(n, bytes) && guarded.every((g) => within(n, g)));
}

const IPV4_TAIL = (b: Uint8Array, at: number) => `${b[at]}.${b[at + 1]}.${b[at + 2]}.${b[at + 3]}`;

/** The IPv4 addresses an IPv6 address embeds or reaches, with the form's name; [] when none. */
function embedded(b: Uint8Array): { form: string; ipv4: string }[] {
  const zeros = (from: number, to: number) => b.subarray(from, to).every((x) => x === 0);
  const word = (i: number) => ((b[i] as number) << 8) | (b[i + 1] as number);
  if (zeros(0, 10) && word(10) === 0xffff) return [{ form: 'IPv4-mapped', ipv4: IPV4_TAIL(b, 12) }];
  if (zeros(0, 8) && word(8) === 0xffff && word(10) === 0)
    return [{ form: 'IPv4-translated', ipv4: IPV4_TAIL(b, 12) }];
  // :: and ::1 are judged as themselves (unspecified, loopback).
  if (zeros(0, 12) && !(zeros(12, 15) && (b[15] as number) <= 1))
    return [{ form: 'IPv4-compatible', ipv4: IPV4_TAIL(b, 12) }];
  if (word(0) === 0x64 && word(2) === 0xff9b && zeros(4, 12))
    return [{ form: 'NAT64', ipv4: IPV4_TAIL(b, 12) }];
  if (word(0) === 0x2002) return [{ form: '6to4', ipv4: IPV4_TAIL(b, 2) }];
  if (word(0) === 0x2001 && word(2) === 0) {
    const client = Uint8Array.from(b.subarray(12, 16), (x) => x ^ 0xff);
    return [
      { form: 'Teredo server', ipv4: IPV4_TAIL(b, 4) },
      { form: 'Teredo client', ipv4: IPV4_TAIL(client, 0) },
    ];
  }
  return [];
}

/** Why an address may not be a webhook target under `policy`, or null when it may. */
export function refusedAddress(address: string, policy: TargetPolicy = PUBLIC_ONLY): string | null {
  if (address.includes('%')) return 'a zone-scoped IPv6 address';
  const bytes = isIP(address) === 0 ? null : bytesOf(address);
  if (!bytes) return 'not an IP address';
  if (bytes.length === 16) {
    const inside = embedded(bytes);
    for (const { form, ipv4 } of inside) {
      const why = refusedAddress(ipv4, policy);
      if (why) return `the ${form} form of ${ipv4}, ${why}`;
    }
    if (inside.length > 0) return null;
  }
  if (allowedBy(policy, bytes)) return null;
  const hit = REFUSED.find((r) => r.networks.some((n) => contains(n, bytes)));
  return hit ? hit.what : null;
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

/** How a host name becomes addresses. */
export type AddressLookup = (name: string) => Promise<{ address: string; family: number }[]>;

/** The system's resolution (getaddrinfo: /etc/hosts, then the system's resolvers). */
export const systemLookup: AddressLookup = (name) => lookup(name, { all: true, verbatim: true });

/**
 * DNS_SERVERS, when set: A and AAAA from those servers (the resolvers domain verification uses; no
 * /etc/hosts). Fails only when both fail; a name with neither record answers [] (unresolved).
 */
export function serversLookup(dns: {
  servers: readonly string[];
  timeoutMs: number;
  tries: number;
}): AddressLookup {
  const resolver = new Resolver({ timeout: dns.timeoutMs, tries: dns.tries });
  resolver.setServers([...dns.servers]);
  const absent = new Set(['ENOTFOUND', 'ENODATA']);
  return async (name) => {
    const [v4, v6] = await Promise.allSettled([resolver.resolve4(name), resolver.resolve6(name)]);
    const found = [
      ...(v4.status === 'fulfilled' ? v4.value.map((address) => ({ address, family: 4 })) : []),
      ...(v6.status === 'fulfilled' ? v6.value.map((address) => ({ address, family: 6 })) : []),
    ];
    const failed = [v4, v6].find(
      (r): r is PromiseRejectedResult =>
        r.status === 'rejected' && !absent.has(String((r.reason as NodeJS.ErrnoException).code)),
    );
    // A server that fails one family may hide an address of it: refuse to judge on half an answer.
    if (failed) throw failed.reason;
    return found;
  };
}

/**
 * Resolves `hostname` and answers the address to connect to, after checking every address it
 * resolves to under `policy` (one refused address refuses the name: a rebinding answer cannot slip
 * one in).
 */
export async function resolveTarget(
  hostname: string,
  policy: TargetPolicy,
  resolve: AddressLookup = systemLookup,
): Promise<ResolvedTarget> {
  const bare = hostname.startsWith('[') && hostname.endsWith(']') ? hostname.slice(1, -1) : hostname;
  let addresses: { address: string; family: number }[];
  if (isIP(bare)) addresses = [{ address: bare, family: isIP(bare) }];
  else {
    try {
      addresses = await resolve(bare);
    } catch (err) {
      throw new TargetRefused(
        `${bare} does not resolve (${(err as NodeJS.ErrnoException).code ?? 'error'})`,
        'unresolved',
      );
    }
  }
  if (addresses.length === 0) throw new TargetRefused(`${bare} does not resolve`, 'unresolved');
  for (const a of addresses) {
    const why = refusedAddress(a.address, policy);
    if (why) {
      const hint = policy.allowed.length > 0 ? ' (not opened by WEBHOOK_ALLOWED_NETWORKS)' : '';
      throw new TargetRefused(`${bare} resolves to ${a.address}, ${why}${hint}`);
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
