import fs from 'node:fs/promises';
import https from 'node:https';
import path from 'node:path';
import type * as acme from 'acme-client';
import { commonJsExports } from '../../commonjs.js';
import type { Db } from '../../db/client.js';
import { type Resealer, resealEach, type SecretBox } from '../../secrets.js';
import { type CallContext, DriverError, type InstallRef } from '../driver.js';
import * as repo from './acme.repo.js';
import { pathsOf } from './names.js';

/**
 * acme-client (with node-forge and axios, ~1 MB of the server's bundle) is loaded at the first order,
 * not at every start: most servers never order a certificate from this process (issue 29 defect 4).
 */
let loaded: Promise<typeof acme> | null = null;
const acmeClient = () => {
  loaded ??= import('acme-client').then((m) => commonJsExports(m));
  return loaded;
};

/**
 * Issue 21: the local driver's certificate orders through ACME (RFC 8555) with `acme-client`, against
 * ACME_DIRECTORY_URL (Let's Encrypt's production directory by default, Pebble in tests).
 *
 * - The account key is made once per directory and sealed at rest (acme_accounts); the account is
 *   registered with `termsOfServiceAgreed` (and ACME_EMAIL as its contact when set).
 * - An order is kept per driver call key (acme_orders): the certificate's key (sealed) and the ACME
 *   order URL, so a retried job resumes the same order (or, when the CA says it is invalid or gone,
 *   starts a new one with the same key), and a call whose chain was stored answers it again.
 * - HTTP-01: the key authorization is written under the install's challenge directory, which nginx
 *   serves at `/.well-known/acme-challenge/` for every name of the install (webserver.ts).
 * - Every HTTP request of the client carries the job's AbortSignal, a timeout, and the CA bundle of
 *   ACME_CA_BUNDLE when set (an https.Agent of this issuer only: nothing global is changed, and
 *   verification is never turned off). Waiting for the CA is bounded (WAIT_MS) and abortable.
 */

export interface AcmeConfig {
  /** ACME_DIRECTORY_URL. */
  directoryUrl: string;
  /** ACME_EMAIL: the account's contact, or null. */
  email: string | null;
  /** ACME_CA_BUNDLE: a PEM file of the CAs trusted for the directory's TLS (added to Node's), or null. */
  caBundleFile: string | null;
}

/** Per HTTP request to the CA. */
const REQUEST_MS = 30_000;
/** Longest wait for the CA to validate the challenges or issue the certificate in one call. */
const WAIT_MS = 120_000;

const accountContext = (directoryUrl: string) => `acme-account:${directoryUrl}`;
const orderContext = (key: string) => `acme-order:${key}`;

/**
 * Where the install's HTTP-01 tokens live: its `acme-challenge/` directory (names.ts `pathsOf`), which
 * nginx serves at `/.well-known/acme-challenge/` on every name of the install (routing, webserver.ts).
 */
export function challengeDir(hostingRoot: string, installId: string): string {
  return pathsOf(hostingRoot, installId).challenges;
}

/** An ACME token is base64url (RFC 8555 8.3): checked before it names a file. */
function tokenFile(hostingRoot: string, installId: string, token: string): string {
  if (!/^[A-Za-z0-9_-]{1,256}$/.test(token))
    throw new Error(`unexpected ACME token ${JSON.stringify(token)}`);
  return path.join(challengeDir(hostingRoot, installId), token);
}

/** Writes a key authorization where nginx serves it (readable by nginx's workers). */
export async function writeChallengeToken(
  hostingRoot: string,
  installId: string,
  token: string,
  keyAuthorization: string,
): Promise<void> {
  const file = tokenFile(hostingRoot, installId, token);
  await fs.mkdir(path.dirname(file), { recursive: true, mode: 0o755 });
  // Explicit modes: the worker's umask (077, issue 28) would keep nginx's workers out.
  await fs.chmod(path.dirname(file), 0o755);
  const temp = `${file}.tmp`;
  await fs.writeFile(temp, keyAuthorization, { mode: 0o644 });
  await fs.chmod(temp, 0o644);
  await fs.rename(temp, file);
}

export async function removeChallengeToken(hostingRoot: string, installId: string, token: string) {
  await fs.rm(tokenFile(hostingRoot, installId, token), { force: true });
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason ?? new Error('aborted'));
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason ?? new Error('aborted'));
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

/** The message of an ACME problem document (RFC 7807), or null. */
function problemOf(value: unknown): string | null {
  if (!value || typeof value !== 'object') return null;
  const { type, detail } = value as { type?: unknown; detail?: unknown };
  if (typeof detail === 'string' && detail) return typeof type === 'string' ? `${detail} (${type})` : detail;
  return typeof type === 'string' ? type : null;
}

/** The CA refused (an authorization or the order is invalid): retrying the same names would not help. */
class AcmeRefusal extends Error {}

type HttpClient = {
  request: (url: string, method: string, opts?: Record<string, unknown>) => Promise<unknown>;
};

export interface AcmeIssuerDeps {
  db: Db;
  secretBox: SecretBox;
  hostingRoot: string;
  config: AcmeConfig;
  /**
   * The names of `names` nginx does not serve for the install yet (the web tier's; throws when nothing
   * can serve challenges). An ordered name is one of the install's domains, served once its routing
   * has been applied: until then the order waits (a retried job) instead of spending a failed
   * validation at the CA.
   */
  unservedNames: (install: InstallRef, names: string[]) => Promise<string[]>;
}

export function createAcmeIssuer(deps: AcmeIssuerDeps) {
  const { db, secretBox, hostingRoot, config } = deps;
  const directoryUrl = config.directoryUrl;
  let agent: Promise<https.Agent> | null = null;

  /** The TLS agent of this issuer: Node's CAs plus ACME_CA_BUNDLE's (read on first use). */
  function tlsAgent(): Promise<https.Agent> {
    agent ??= (async () => {
      if (!config.caBundleFile) return new https.Agent({ keepAlive: false });
      const pem = await fs.readFile(config.caBundleFile, 'utf8').catch((err: Error) => {
        throw new Error(`ACME_CA_BUNDLE ${config.caBundleFile} cannot be read: ${err.message}`);
      });
      const { rootCertificates } = await import('node:tls');
      return new https.Agent({ keepAlive: false, ca: [...rootCertificates, pem] });
    })();
    agent.catch(() => {
      agent = null;
    });
    return agent;
  }

  /**
   * A client of the directory for one call: every request with the agent, the call's signal and a
   * timeout, and no retry inside the library (its retries wait up to 75 s without the signal; a
   * failed call is retried by its job instead).
   */
  async function clientFor(signal: AbortSignal): Promise<acme.Client> {
    let account = await repo.findAccount(db, directoryUrl);
    if (!account) {
      const key = await (await acmeClient()).crypto.createPrivateKey();
      await repo.insertAccount(db, {
        directory_url: directoryUrl,
        key_sealed: secretBox.seal(key, accountContext(directoryUrl)),
      });
      account = await repo.findAccount(db, directoryUrl);
      if (!account) throw new Error('the ACME account vanished');
    }
    const accountKey = secretBox.open(account.key_sealed, accountContext(directoryUrl));
    const client = new (await acmeClient()).Client({
      directoryUrl,
      accountKey,
      ...(account.account_url ? { accountUrl: account.account_url } : {}),
    });
    const httpsAgent = await tlsAgent();
    const http = (client as unknown as { http: HttpClient }).http;
    const request = http.request.bind(http);
    http.request = (url, method, opts = {}) =>
      request(url, method, { ...opts, httpsAgent, signal, timeout: REQUEST_MS, retryAttempt: 1_000 });
    if (!account.account_url) {
      await client.createAccount({
        termsOfServiceAgreed: true,
        ...(config.email ? { contact: [`mailto:${config.email}`] } : {}),
      });
      await repo.setAccountUrl(db, directoryUrl, client.getAccountUrl());
    }
    return client;
  }

  /** Polls until `done` holds, within WAIT_MS and the call's signal. */
  async function waitFor<T>(
    fetch: () => Promise<T>,
    done: (value: T) => boolean,
    what: string,
    signal: AbortSignal,
  ) {
    const deadline = Date.now() + WAIT_MS;
    let delay = 200;
    for (;;) {
      const value = await fetch();
      if (done(value)) return value;
      if (Date.now() + delay > deadline) throw new Error(`the CA did not ${what} within ${WAIT_MS / 1000} s`);
      await sleep(delay, signal);
      delay = Math.min(delay * 2, 2_000);
    }
  }

  /** HTTP-01 for every pending authorization of the order; throws the CA's problem for a failed one. */
  async function answerChallenges(
    client: acme.Client,
    order: acme.Order,
    install: InstallRef,
    signal: AbortSignal,
  ) {
    const tokens: string[] = [];
    try {
      for (const authz of await client.getAuthorizations(order)) {
        if (authz.status !== 'pending') continue;
        const challenge = authz.challenges.find((c) => c.type === 'http-01');
        if (!challenge) throw new Error(`the CA offers no HTTP-01 challenge for ${authz.identifier.value}`);
        const keyAuthorization = await client.getChallengeKeyAuthorization(challenge);
        await writeChallengeToken(hostingRoot, install.id, challenge.token, keyAuthorization);
        tokens.push(challenge.token);
        if (challenge.status === 'pending') await client.completeChallenge(challenge);
      }
      const authzs = await waitFor(
        () => client.getAuthorizations(order),
        (all) => all.every((a) => a.status !== 'pending'),
        'validate the challenges',
        signal,
      );
      for (const authz of authzs) {
        if (authz.status === 'valid') continue;
        const failed = authz.challenges.find((c) => c.type === 'http-01');
        const why = problemOf(failed?.error) ?? `authorization ${authz.status}`;
        throw new AcmeRefusal(`challenge for ${authz.identifier.value} failed: ${why}`);
      }
    } finally {
      for (const token of tokens) await removeChallengeToken(hostingRoot, install.id, token);
    }
  }

  /** The order of this call's key, resumed when the CA still has it and it can still succeed. */
  async function currentOrder(client: acme.Client, key: string, orderUrl: string | null, names: string[]) {
    if (orderUrl) {
      try {
        const order = await client.getOrder({ url: orderUrl } as acme.Order);
        if (order.status !== 'invalid') return order;
      } catch {
        // Gone (expired, or the CA forgot it): a new order below.
      }
    }
    const order = await client.createOrder({ identifiers: names.map((value) => ({ type: 'dns', value })) });
    await repo.setOrderUrl(db, key, order.url);
    return order;
  }

  async function issueOnce(call: CallContext, install: InstallRef, names: string[]) {
    const { key, signal } = call;
    let row = await repo.findOrder(db, key);
    if (!row) {
      const certKey = await (await acmeClient()).crypto.createPrivateRsaKey(2048);
      await repo.insertOrder(db, {
        key,
        install_id: install.id,
        directory_url: directoryUrl,
        key_sealed: secretBox.seal(certKey, orderContext(key)),
      });
      row = await repo.findOrder(db, key);
      if (!row) throw new Error('the ACME order vanished');
    }
    const keyPem = secretBox.open(row.key_sealed, orderContext(key)).toString('utf8');
    if (row.chain_pem) return { chain_pem: row.chain_pem, key_pem: keyPem };

    const unserved = await deps.unservedNames(install, names);
    if (unserved.length > 0)
      throw new Error(
        `${unserved.join(', ')} not served over HTTP yet (the install's routing is still being applied)`,
      );
    const client = await clientFor(signal);
    let order = await currentOrder(client, key, row.order_url, names);
    if (order.status === 'pending') {
      await answerChallenges(client, order, install, signal);
      order = await waitFor(
        () => client.getOrder(order),
        (o) => o.status !== 'pending',
        'mark the order ready',
        signal,
      );
    }
    if (order.status === 'ready') {
      const [, csr] = await (await acmeClient()).crypto.createCsr(
        { commonName: names[0], altNames: names },
        keyPem,
      );
      order = await client.finalizeOrder(order, csr);
    }
    order = await waitFor(
      () => client.getOrder(order),
      (o) => o.status === 'valid' || o.status === 'invalid',
      'issue the certificate',
      signal,
    );
    if (order.status !== 'valid')
      throw new Error(
        `the order is ${order.status}: ${problemOf((order as { error?: unknown }).error) ?? 'no reason given'}`,
      );
    const chain = await client.getCertificate(order);
    await repo.setChain(db, key, chain);
    return { chain_pem: chain, key_pem: keyPem };
  }

  return {
    /** The local driver's issueCertificate: a chain and its key (the caller seals the key). */
    async issue(call: CallContext, install: InstallRef, names: string[]) {
      try {
        return await issueOnce(call, install, names);
      } catch (err) {
        const message = call.signal.aborted
          ? `aborted: ${String(call.signal.reason)}`
          : (err as Error).message;
        throw new DriverError(
          'issue_certificate',
          `ACME order for ${names.join(', ')} failed: ${message}`,
          err instanceof AcmeRefusal,
        );
      }
    },
  };
}

export type AcmeIssuer = ReturnType<typeof createAcmeIssuer>;

/** On deprovision: the install's orders (their sealed keys); its challenge directory goes with its files. */
export async function forgetInstall(db: Db, installId: string) {
  await repo.deleteOrdersOf(db, installId);
}

/** `hostplane reseal`: the ACME account keys and the orders' certificate keys. */
export async function resealAcmeKeys(tx: Db, reseal: Resealer) {
  const { accounts, orders } = await repo.sealedKeys(tx);
  const count = await resealEach(
    accounts,
    reseal,
    (row) => ({ sealed: row.sealed, context: accountContext(row.id) }),
    (row, next) => repo.setAccountKey(tx, row.id, next),
  );
  return resealEach(
    orders,
    reseal,
    (row) => ({ sealed: row.sealed, context: orderContext(row.id) }),
    (row, next) => repo.setOrderKey(tx, row.id, next),
    count,
  );
}
