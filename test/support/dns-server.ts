import type { AddressInfo } from 'node:net';
import { after } from 'node:test';
import dns2 from 'dns2';

const { Packet } = dns2;

/** What the server answers for one name (types without records get an empty answer: NODATA). */
export type DnsAnswer =
  /**
   * Records by type. TXT: a record is one string or several character-strings (each at most 255
   * bytes). A name with a `cname` answers A/AAAA questions with the CNAME and the target's records.
   */
  | { txt?: (string | string[])[]; a?: string[]; aaaa?: string[]; cname?: string }
  /** An error response code. */
  | { rcode: 'NXDOMAIN' | 'SERVFAIL' | 'REFUSED' }
  /** Never answers: the client times out. */
  | { hang: true };

export interface TestDnsServer {
  /** `127.0.0.1:<port>`, for DNS_SERVERS. */
  readonly address: string;
  /** Sets the answer for a name (case-insensitive); unknown names are NXDOMAIN. */
  answer(name: string, answer: DnsAnswer): void;
  /** Every name asked, lower-case, in order. */
  readonly queries: string[];
  close(): Promise<void>;
}

// dns2 2.4.0 (the last that declares Node 20, decision 151) has Packet.RCODE at run time, not in its types.
const { RCODE } = Packet as unknown as { RCODE: Record<'NXDOMAIN' | 'SERVFAIL' | 'REFUSED', number> };
const RCODES = {
  NXDOMAIN: RCODE.NXDOMAIN,
  SERVFAIL: RCODE.SERVFAIL,
  REFUSED: RCODE.REFUSED,
};

/**
 * A real DNS server (dns2) on 127.0.0.1, UDP and TCP on the same free port, answering per name as
 * the test configures. Closed after the test file.
 */
export async function startDnsServer(): Promise<TestDnsServer> {
  const answers = new Map<string, DnsAnswer>();
  const queries: string[] = [];
  const handle: dns2.DnsHandler = (request, send) => {
    const question = request.questions[0];
    const response = Packet.createResponseFromRequest(request);
    const name = (question?.name ?? '').toLowerCase();
    queries.push(name);
    const answer = answers.get(name) ?? { rcode: 'NXDOMAIN' };
    if ('hang' in answer) return;
    if ('rcode' in answer) {
      response.header.rcode = RCODES[answer.rcode];
    } else if (question) {
      response.answers.push(...records(question.name, question.type, answer));
    }
    send(response).catch(() => {});
  };

  type Records = Exclude<DnsAnswer, { rcode: unknown } | { hang: true }>;
  function records(name: string, type: number, answer: Records): InstanceType<typeof Packet.Resource>[] {
    const make = (t: number, fill: (r: Record<string, unknown>) => void) => {
      const record = new Packet.Resource(name, t, Packet.CLASS.IN, 60);
      fill(record as unknown as Record<string, unknown>);
      return record as unknown as InstanceType<typeof Packet.Resource>;
    };
    if (type === Packet.TYPE.TXT) return (answer.txt ?? []).map((data) => make(type, (r) => (r.data = data)));
    if (type === Packet.TYPE.CNAME && answer.cname) return [make(type, (r) => (r.domain = answer.cname))];
    if (type !== Packet.TYPE.A && type !== Packet.TYPE.AAAA) return [];
    const key = type === Packet.TYPE.A ? 'a' : 'aaaa';
    if (answer.cname) {
      const target = answers.get(answer.cname.toLowerCase());
      const followed = target && !('rcode' in target) && !('hang' in target) ? (target[key] ?? []) : [];
      return [
        make(Packet.TYPE.CNAME, (r) => (r.domain = answer.cname)),
        ...followed.map((address) =>
          Object.assign(
            make(type, (r) => (r.address = address)),
            { name: answer.cname },
          ),
        ),
      ];
    }
    return (answer[key] ?? []).map((address) => make(type, (r) => (r.address = address)));
  }

  // UDP first on port 0, then TCP on the same port (resolvers fall back to TCP on the same port).
  for (let attempt = 0; attempt < 10; attempt++) {
    const udp = dns2.createUDPServer(handle);
    await udp.listen(0, '127.0.0.1');
    const port = (udp.address() as AddressInfo).port;
    const tcp = dns2.createTCPServer(handle);
    const bound = await new Promise<boolean>((resolve) => {
      tcp.once('error', () => resolve(false));
      tcp.listen(port, '127.0.0.1');
      tcp.once('listening', () => resolve(true));
    });
    if (!bound) {
      udp.close();
      continue;
    }
    const server: TestDnsServer = {
      address: `127.0.0.1:${port}`,
      answer: (name, answer) => {
        answers.set(name.toLowerCase(), answer);
      },
      queries,
      close: async () => {
        await Promise.all([
          new Promise<void>((resolve) => udp.close(() => resolve())),
          new Promise<void>((resolve) => tcp.close(() => resolve())),
        ]);
      },
    };
    after(() => server.close());
    return server;
  }
  throw new Error('could not bind a DNS server on 127.0.0.1');
}

/** Splits text into DNS character-strings of at most 255 bytes (ASCII text assumed). */
export const characterStrings = (text: string): string[] =>
  Array.from({ length: Math.ceil(text.length / 255) }, (_, i) => text.slice(i * 255, (i + 1) * 255));
