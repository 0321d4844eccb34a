import { createPrivateKey, randomBytes, webcrypto } from 'node:crypto';
import type * as X509 from '@peculiar/x509';
import { commonJsExports } from '../../commonjs.js';
import type { Db } from '../../db/client.js';
import type { SecretBox } from '../../secrets.js';
import { findCa, insertCa } from './simulated.repo.js';

/**
 * The simulated platform's certificate authority: what fulfils certificate orders when
 * HOSTING_DRIVER=simulated. node:crypto parses certificates but cannot sign them, so @peculiar/x509
 * (over Node's WebCrypto) builds them (docs/decisions.md). The CA is made once, on the first order;
 * its private key is kept only sealed with the secret box, like imported certificate keys.
 */

/**
 * @peculiar/x509 (and tsyringe, which needs the Reflect metadata API) load on the first certificate,
 * not at every start (issue 14: about a second of a loaded machine's start-up).
 */
let x509Module: Promise<typeof X509> | null = null;
function loadX509(): Promise<typeof X509> {
  x509Module ??= import('reflect-metadata')
    .then(() => import('@peculiar/x509'))
    .then((m) => commonJsExports(m));
  return x509Module;
}

const CA_ID = 'default';
/** What the CA's sealed key is bound to (secrets.ts `context`). */
export const CA_KEY_CONTEXT = 'simulated-ca';
const CA_NAME = 'CN=Hostplane Simulated CA, O=Hostplane (simulated driver)';
const crypto = webcrypto;
/** The same WebCrypto, typed as @peculiar/x509 names it. */
const provider = webcrypto as unknown as NonNullable<
  Parameters<typeof X509.X509CertificateGenerator.create>[1]
>;
const EC = { name: 'ECDSA', namedCurve: 'P-256' } as const;
const SIGNING = { name: 'ECDSA', hash: 'SHA-256' } as const;
const DAY = 86_400_000;
/** Like Let's Encrypt: 90 days. */
export const SIMULATED_CERT_DAYS = 90;

const serial = () => `01${randomBytes(15).toString('hex')}`;

function pkcs8Pem(der: ArrayBuffer): string {
  return createPrivateKey({ key: Buffer.from(der), format: 'der', type: 'pkcs8' })
    .export({ type: 'pkcs8', format: 'pem' })
    .toString();
}

async function generateKeys(): Promise<webcrypto.CryptoKeyPair> {
  return (await crypto.subtle.generateKey(EC, true, ['sign', 'verify'])) as webcrypto.CryptoKeyPair;
}

/** The CA certificate and signing key, made and stored on first use (two racing workers agree on one). */
async function loadOrCreateCa(db: Db, box: SecretBox, now: Date) {
  const x509 = await loadX509();
  let row = await findCa(db, CA_ID);
  if (!row) {
    const keys = await generateKeys();
    const cert = await x509.X509CertificateGenerator.createSelfSigned(
      {
        serialNumber: serial(),
        name: CA_NAME,
        notBefore: new Date(now.getTime() - DAY),
        notAfter: new Date(now.getTime() + 3650 * DAY),
        keys,
        signingAlgorithm: SIGNING,
        extensions: [
          new x509.BasicConstraintsExtension(true, 0, true),
          new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
          await x509.SubjectKeyIdentifierExtension.create(keys.publicKey, false, provider),
        ],
      },
      provider,
    );
    const der = await crypto.subtle.exportKey('pkcs8', keys.privateKey);
    await insertCa(db, {
      id: CA_ID,
      cert_pem: cert.toString('pem'),
      key_sealed: box.seal(Buffer.from(der), CA_KEY_CONTEXT),
    });
    row = await findCa(db, CA_ID);
  }
  if (!row) throw new Error('simulated CA could not be stored');
  const keyDer = box.open(row.key_sealed, CA_KEY_CONTEXT);
  const signingKey = await crypto.subtle.importKey('pkcs8', keyDer, EC, false, ['sign']);
  return { cert: new x509.X509Certificate(row.cert_pem), signingKey };
}

/** A certificate for `names` (the first is the subject CN), with a fresh P-256 key: PEM chain and key. */
export async function issueSimulatedCertificate(
  db: Db,
  box: SecretBox,
  input: { names: string[]; now: Date },
): Promise<{ chain_pem: string; key_pem: string }> {
  const x509 = await loadX509();
  const ca = await loadOrCreateCa(db, box, input.now);
  const keys = await generateKeys();
  const cert = await x509.X509CertificateGenerator.create(
    {
      serialNumber: serial(),
      subject: `CN=${input.names[0]}`,
      issuer: ca.cert.subject,
      notBefore: new Date(input.now.getTime() - 60_000),
      notAfter: new Date(input.now.getTime() + SIMULATED_CERT_DAYS * DAY),
      publicKey: keys.publicKey,
      signingKey: ca.signingKey,
      signingAlgorithm: SIGNING,
      extensions: [
        new x509.BasicConstraintsExtension(false, undefined, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
        new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
        new x509.SubjectAlternativeNameExtension(
          input.names.map((value) => ({ type: 'dns' as const, value })),
        ),
        await x509.AuthorityKeyIdentifierExtension.create(ca.cert.publicKey, false, provider),
        await x509.SubjectKeyIdentifierExtension.create(keys.publicKey, false, provider),
      ],
    },
    provider,
  );
  const keyDer = await crypto.subtle.exportKey('pkcs8', keys.privateKey);
  return {
    chain_pem: `${cert.toString('pem')}\n${ca.cert.toString('pem')}\n`,
    key_pem: pkcs8Pem(keyDer),
  };
}
