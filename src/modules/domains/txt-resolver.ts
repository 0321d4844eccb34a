import { Resolver } from 'node:dns/promises';
import type { Config } from '../../config.js';
import { Errors } from '../../errors.js';

/** The one lookup domain verification needs; node:dns `Resolver` has it, tests may pass their own. */
export interface TxtResolver {
  resolveTxt(name: string): Promise<string[][]>;
}

/**
 * A dedicated resolver (never the process-wide `dns` settings): DNS_SERVERS when set, else the
 * system's resolvers, with a bounded timeout so a dead server costs seconds, not minutes.
 */
export function createTxtResolver(dns: Config['dns']): TxtResolver {
  const resolver = new Resolver({ timeout: dns.timeoutMs, tries: dns.tries });
  if (dns.servers.length > 0) resolver.setServers([...dns.servers]);
  return resolver;
}

// The name or the record does not exist: an answer, not a failure (the domain stays pending).
const ABSENT = new Set(['ENOTFOUND', 'ENODATA']);
// The server answered with something unreadable (e.g. one character-string over 255 bytes).
const BAD_ANSWER = new Set(['EBADRESP', 'EFORMERR', 'EBADNAME']);

/**
 * D7: the TXT records at `name`, or [] when there are none. A failed lookup (timeout, SERVFAIL,
 * refused, no server) is a 503 and a garbled answer a 502, never a false "not found".
 */
export async function lookupTxt(resolver: TxtResolver, name: string): Promise<string[][]> {
  try {
    return await resolver.resolveTxt(name);
  } catch (err) {
    const code = String((err as NodeJS.ErrnoException).code ?? 'EUNKNOWN');
    if (ABSENT.has(code)) return [];
    if (BAD_ANSWER.has(code)) {
      throw Errors.badUpstream(
        `DNS lookup of the TXT record ${name} got an invalid answer (${code}); the domain is unchanged`,
      );
    }
    throw Errors.unavailable(
      `DNS lookup of the TXT record ${name} failed (${code}); the domain is unchanged, retry later`,
    );
  }
}
