import type { AddressInfo } from 'node:net';
import { after } from 'node:test';
import dns2 from 'dns2';

const { Packet } = dns2;

/** What the server answers for one name (TXT questions; other types get an empty answer). */
export type DnsAnswer =
  /** TXT records; a record is one string or several character-strings (each at most 255 bytes). */
  | { txt: (string | string[])[] }
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

const RCODES = {
  NXDOMAIN: Packet.RCODE.NXDOMAIN,
  SERVFAIL: Packet.RCODE.SERVFAIL,
  REFUSED: Packet.RCODE.REFUSED,
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
    } else if (question?.type === Packet.TYPE.TXT) {
      for (const data of answer.txt) {
        const record = new Packet.Resource(question.name, Packet.TYPE.TXT, Packet.CLASS.IN, 60);
        record.data = data;
        response.answers.push(record);
      }
    }
    send(response).catch(() => {});
  };

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
