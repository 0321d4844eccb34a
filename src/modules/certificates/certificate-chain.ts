import { createPrivateKey, type KeyObject, X509Certificate } from 'node:crypto';
import fs from 'node:fs';
import { rootCertificates } from 'node:tls';
import { AppError, type FieldError } from '../../errors.js';
import { isWildcard } from '../domains/domain-name.js';

/** Most certificates an imported chain may hold (end-entity plus intermediates, optionally a root). */
export const MAX_CHAIN_LENGTH = 10;

type Field = 'certificate' | 'private_key';

/** L2: every failure is a 400 naming its field, with one `code` per kind of failure. */
function reject(field: Field, code: string, message: string): never {
  const error: FieldError = { resource: 'ssl_certificate', field, type: 'invalid_value', code, message };
  throw new AppError('bad_request', message, [error]);
}

/** L1: strict base64 (standard or URL-safe alphabet, line breaks allowed) that decodes to text. */
function decodeBase64(value: string, field: Field): string {
  const compact = value.replace(/\s+/g, '');
  if (compact.includes('-----BEGIN')) {
    reject(field, 'invalid_base64', `${field} must be base64-encoded PEM: encode the PEM text with base64`);
  }
  if (compact === '' || compact.length % 4 === 1 || !/^[A-Za-z0-9+/_-]+={0,2}$/.test(compact)) {
    reject(field, 'invalid_base64', `${field} is not valid base64`);
  }
  return Buffer.from(compact, 'base64').toString('utf8');
}

interface PemBlock {
  label: string;
  text: string;
}

function pemBlocks(text: string): PemBlock[] {
  const blocks = [...text.matchAll(/-----BEGIN ([A-Z0-9 ]+)-----[\s\S]*?-----END \1-----/g)];
  return blocks.map((m) => ({ label: m[1] ?? '', text: m[0] }));
}

const subjectOf = (cert: X509Certificate) => cert.subject.split('\n').join(', ');

/** Every PEM block of `certificate` is a CERTIFICATE that parses (a fullchain must be split first). */
function parseChain(text: string): X509Certificate[] {
  const blocks = pemBlocks(text);
  if (blocks.length === 0)
    reject('certificate', 'no_certificate', 'certificate holds no PEM CERTIFICATE block');
  const stray = blocks.find((b) => b.label !== 'CERTIFICATE');
  if (stray) {
    const hint = stray.label.includes('PRIVATE KEY') ? '; send the key in private_key' : '';
    reject('certificate', 'unexpected_pem_block', `certificate holds a ${stray.label} block${hint}`);
  }
  if (text.split('-----BEGIN ').length - 1 !== blocks.length) {
    reject('certificate', 'malformed_certificate', 'certificate holds a PEM block without its END line');
  }
  if (blocks.length > MAX_CHAIN_LENGTH) {
    reject('certificate', 'chain_too_long', `certificate holds more than ${MAX_CHAIN_LENGTH} certificates`);
  }
  return blocks.map((block, i) => {
    try {
      return new X509Certificate(block.text);
    } catch {
      return reject(
        'certificate',
        'malformed_certificate',
        `certificate ${i + 1} of the chain does not parse`,
      );
    }
  });
}

function parsePrivateKey(text: string): KeyObject {
  const block = pemBlocks(text).find((b) => b.label.endsWith('PRIVATE KEY'));
  if (!block) reject('private_key', 'malformed_private_key', 'private_key holds no PEM PRIVATE KEY block');
  if (block.label === 'ENCRYPTED PRIVATE KEY' || /Proc-Type:\s*4,ENCRYPTED/.test(block.text)) {
    reject('private_key', 'encrypted_private_key', 'private_key is encrypted; send it without a passphrase');
  }
  try {
    return createPrivateKey({ key: block.text, format: 'pem' });
  } catch {
    return reject('private_key', 'malformed_private_key', 'private_key does not parse as a private key');
  }
}

const issuedBy = (child: X509Certificate, parent: X509Certificate) =>
  child.checkIssued(parent) && child.verify(parent.publicKey);

// Not checkIssued(cert, cert): OpenSSL's issuer check also wants keyCertSign, which a self-signed
// end-entity certificate lacks.
const selfSigned = (cert: X509Certificate) => cert.subject === cert.issuer && cert.verify(cert.publicKey);

/**
 * L2: the first certificate is the end-entity one, each is signed by the next, and the chain ends in
 * a self-signed root or in a certificate issued by a trusted root (so no intermediate is missing).
 * Revocation is not checked.
 */
function checkChain(chain: X509Certificate[], trustedRoots: readonly X509Certificate[]) {
  const [leaf] = chain;
  if (!leaf) return;
  if (leaf.ca) {
    reject(
      'certificate',
      'not_end_entity',
      `The first certificate (${subjectOf(leaf)}) is a CA certificate; put the end-entity certificate first`,
    );
  }
  for (let i = 0; i + 1 < chain.length; i++) {
    const child = chain[i] as X509Certificate;
    const parent = chain[i + 1] as X509Certificate;
    if (!issuedBy(child, parent)) {
      reject(
        'certificate',
        'chain_broken',
        `Certificate ${i + 1} (${subjectOf(child)}) is not signed by certificate ${i + 2} (${subjectOf(parent)}); ` +
          'order the chain from the end-entity certificate up to its issuers',
      );
    }
    if (!parent.ca) {
      reject(
        'certificate',
        'issuer_not_ca',
        `Certificate ${i + 2} (${subjectOf(parent)}) is not a CA certificate`,
      );
    }
  }
  const top = chain[chain.length - 1] as X509Certificate;
  if (selfSigned(top)) {
    if (chain.length === 1)
      reject('certificate', 'self_signed', 'A self-signed certificate cannot be imported');
    return;
  }
  if (!trustedRoots.some((root) => issuedBy(top, root))) {
    reject(
      'certificate',
      'chain_incomplete',
      `Certificate ${chain.length} (${subjectOf(top)}) is issued by ${top.issuer.split('\n').join(', ')}, which is ` +
        'neither in the chain nor a trusted root: add the missing intermediate certificates, or, for a ' +
        'private certificate authority, ask the operator to trust its root (NODE_EXTRA_CA_CERTS)',
    );
  }
}

/** L2: nothing in the chain is expired or not yet valid at `now` (the injected clock). */
function checkValidity(chain: X509Certificate[], now: Date) {
  chain.forEach((cert, i) => {
    const which = i === 0 ? 'The certificate' : `Chain certificate ${i + 1} (${subjectOf(cert)})`;
    const notAfter = new Date(cert.validTo);
    const notBefore = new Date(cert.validFrom);
    if (notAfter.getTime() < now.getTime()) {
      reject('certificate', 'certificate_expired', `${which} expired on ${notAfter.toISOString()}`);
    }
    if (notBefore.getTime() > now.getTime()) {
      reject(
        'certificate',
        'certificate_not_yet_valid',
        `${which} is not valid before ${notBefore.toISOString()}`,
      );
    }
  });
}

/** The DNS names of the subjectAltName extension, lower-cased. */
export function dnsNames(cert: X509Certificate): string[] {
  return (cert.subjectAltName ?? '')
    .split(', ')
    .filter((entry) => entry.startsWith('DNS:'))
    .map((entry) => entry.slice(4).toLowerCase());
}

/**
 * Whether the certificate serves `name`: OpenSSL's host check on the SANs (a `*.example.com` SAN
 * covers one label, so `www.example.com` but not `example.com`); the subject CN is ignored, as
 * browsers do. A wildcard domain is covered only by the same wildcard SAN.
 */
export function coversDomain(cert: X509Certificate, name: string): boolean {
  if (isWildcard(name)) return dnsNames(cert).includes(name);
  return cert.checkHost(name, { subject: 'never' }) !== undefined;
}

/** The first certificate of a stored chain (X509Certificate parses only the first PEM block). */
export const leafOf = (chainPem: string) => new X509Certificate(chainPem);

export interface ValidatedImport {
  chainPem: string;
  /** The key as PKCS#8 DER: what is sealed at rest. */
  keyDer: Buffer;
  covered: string[];
  subject: string;
  issuer: string;
  serial: string;
  fingerprint: string;
  notBefore: Date;
  notAfter: Date;
}

/** L1/L2: every check of an imported chain and key; throws a 400 with one field error. */
export function validateImport(
  input: { certificate: string; private_key: string },
  context: { now: Date; domainNames: string[]; trustedRoots: readonly X509Certificate[] },
): ValidatedImport {
  const chainText = decodeBase64(input.certificate, 'certificate');
  const keyText = decodeBase64(input.private_key, 'private_key');
  const chain = parseChain(chainText);
  const key = parsePrivateKey(keyText);
  checkChain(chain, context.trustedRoots);
  const leaf = chain[0] as X509Certificate;
  if (!leaf.checkPrivateKey(key)) {
    reject('private_key', 'key_mismatch', 'private_key does not match the end-entity certificate');
  }
  checkValidity(chain, context.now);
  const covered = context.domainNames.filter((name) => coversDomain(leaf, name));
  if (covered.length === 0) {
    const sans = dnsNames(leaf).join(', ') || 'none';
    const message =
      context.domainNames.length === 0
        ? 'The install has no domains yet; add the domain before importing its certificate'
        : `The certificate (DNS names: ${sans}) covers none of the install's domains`;
    reject('certificate', 'no_matching_domain', message);
  }
  return {
    chainPem: chain.map((cert) => cert.toString()).join(''),
    keyDer: key.export({ type: 'pkcs8', format: 'der' }),
    covered,
    subject: subjectOf(leaf),
    issuer: leaf.issuer.split('\n').join(', '),
    serial: leaf.serialNumber.toUpperCase(),
    fingerprint: leaf.fingerprint256,
    notBefore: new Date(leaf.validFrom),
    notAfter: new Date(leaf.validTo),
  };
}

/**
 * A certificate the hosting platform issued (createDomainCertificateOrder): the same details as an
 * import, without the trust checks (the platform's own CA made it).
 */
export function describeIssued(chainPem: string, keyPem: string, domainNames: string[]): ValidatedImport {
  const chain = parseChain(chainPem);
  const leaf = chain[0] as X509Certificate;
  return {
    chainPem: chain.map((cert) => cert.toString()).join(''),
    keyDer: parsePrivateKey(keyPem).export({ type: 'pkcs8', format: 'der' }),
    covered: domainNames.filter((name) => coversDomain(leaf, name)),
    subject: subjectOf(leaf),
    issuer: leaf.issuer.split('\n').join(', '),
    serial: leaf.serialNumber.toUpperCase(),
    fingerprint: leaf.fingerprint256,
    notBefore: new Date(leaf.validFrom),
    notAfter: new Date(leaf.validTo),
  };
}

let systemRoots: X509Certificate[] | null = null;
/** The roots Node trusts (Mozilla's list), parsed on first use. */
export function systemTrustedRoots(): readonly X509Certificate[] {
  systemRoots ??= rootCertificates.map((pem) => new X509Certificate(pem));
  return systemRoots;
}

/**
 * The extra roots of `NODE_EXTRA_CA_CERTS` (a PEM file, as Node reads it for its own TLS clients;
 * `tls.rootCertificates` does not include them). Read once at start: an unreadable file, or one that
 * holds no certificate or a malformed one, stops the start with a message naming the file, where
 * Node itself would only print a warning.
 */
export function extraTrustedRoots(file: string | null): X509Certificate[] {
  if (file === null) return [];
  // Issue 29 defect 4: parsed once per process (on PostgreSQL a start builds two service graphs;
  // a distribution's bundle of ~140 roots costs ~50 ms of CPU to parse).
  const known = parsedExtraRoots.get(file);
  if (known) return known;
  const roots = parseExtraRoots(file);
  parsedExtraRoots.set(file, roots);
  return roots;
}

const parsedExtraRoots = new Map<string, X509Certificate[]>();

function parseExtraRoots(file: string): X509Certificate[] {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    throw new Error(`NODE_EXTRA_CA_CERTS: cannot read ${file} (${(err as NodeJS.ErrnoException).code})`);
  }
  const blocks = pemBlocks(text).filter((b) => b.label === 'CERTIFICATE');
  if (blocks.length === 0) throw new Error(`NODE_EXTRA_CA_CERTS: ${file} holds no PEM CERTIFICATE block`);
  return blocks.map((block, i) => {
    try {
      return new X509Certificate(block.text);
    } catch {
      throw new Error(`NODE_EXTRA_CA_CERTS: certificate ${i + 1} of ${file} does not parse`);
    }
  });
}

/** What an imported chain may end under: Node's roots plus the operator's extra ones. */
export function trustedRootsWith(extra: readonly X509Certificate[]): () => readonly X509Certificate[] {
  if (extra.length === 0) return systemTrustedRoots;
  let all: X509Certificate[] | null = null;
  return () => {
    all ??= [...systemTrustedRoots(), ...extra];
    return all;
  };
}
