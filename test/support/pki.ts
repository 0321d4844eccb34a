import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after } from 'node:test';

/**
 * A throw-away PKI made with the openssl CLI (Node can parse certificates but not issue them). Every
 * certificate is signed with `openssl ca`, which, unlike `openssl x509 -req` on OpenSSL 3.0, takes
 * explicit start and end dates: that is how the expired and not-yet-valid certificates are made.
 */

export interface Issued {
  certPem: string;
  keyPem: string;
}

export interface LeafOptions {
  names: string[];
  issuer?: Issued;
  notBefore?: Date;
  notAfter?: Date;
  /** `rsa` (default, 2048 bits) or `ec` (P-256). */
  keyType?: 'rsa' | 'ec';
}

const DAY = 86_400_000;

const CONFIG = `
[ ca ]
default_ca = ca_default
[ ca_default ]
dir = .
database = index.txt
new_certs_dir = issued
serial = serial
default_md = sha256
policy = policy_any
unique_subject = no
copy_extensions = none
[ policy_any ]
commonName = supplied
[ root_ext ]
basicConstraints = critical, CA:true
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
[ intermediate_ext ]
basicConstraints = critical, CA:true, pathlen:0
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid:always
[ plain_ext ]
basicConstraints = critical, CA:false
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid:always
[ self_signed_ext ]
basicConstraints = critical, CA:false
keyUsage = critical, digitalSignature, keyEncipherment
subjectKeyIdentifier = hash
subjectAltName = $ENV::SAN
[ leaf_ext ]
basicConstraints = critical, CA:false
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid:always
subjectAltName = $ENV::SAN
`;

/**
 * RSA keys come from a pool shared by the run's test processes (`.tmp/test-keys`, root-only): an
 * RSA-2048 key costs ~0.2 CPU-s to generate and the files asked for dozens. Every key a process takes
 * is a different one (a counter per process), so a test that pairs a certificate with another key
 * still gets a mismatch; two processes may hold the same key, which no test can see. A missing key is
 * generated and linked into place (a racing process's key wins, either is fine).
 */
const KEY_POOL = path.resolve('.tmp/test-keys');
let pooled = 0;
function pooledRsaKey(): string {
  const file = path.join(KEY_POOL, `rsa-${++pooled}.pem`);
  if (!fs.existsSync(file)) {
    fs.mkdirSync(KEY_POOL, { recursive: true, mode: 0o700 });
    const tmp = `${file}.${process.pid}`;
    execFileSync(
      'openssl',
      ['genpkey', '-algorithm', 'RSA', '-pkeyopt', 'rsa_keygen_bits:2048', '-out', tmp],
      {
        stdio: 'pipe',
      },
    );
    try {
      fs.linkSync(tmp, file);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    } finally {
      fs.rmSync(tmp, { force: true });
    }
  }
  return fs.readFileSync(file, 'utf8');
}

/** `YYYYMMDDHHMMSSZ`, the date form `openssl ca -startdate/-enddate` takes. */
const asn1Time = (d: Date) => `${d.toISOString().replace(/[-:T]/g, '').slice(0, 14)}Z`;

export function createPki(now = new Date()) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hostplane-pki-'));
  after(() => fs.rmSync(dir, { recursive: true, force: true }));
  fs.writeFileSync(path.join(dir, 'ca.cnf'), CONFIG);
  fs.writeFileSync(path.join(dir, 'index.txt'), '');
  fs.writeFileSync(path.join(dir, 'serial'), '1000\n');
  fs.mkdirSync(path.join(dir, 'issued'));
  let counter = 0;

  const openssl = (args: string[], san = 'DNS:unused.invalid') =>
    execFileSync('openssl', args, { cwd: dir, env: { ...process.env, SAN: san }, stdio: 'pipe' });

  function newKey(type: 'rsa' | 'ec'): string {
    if (type === 'rsa') return pooledRsaKey();
    const file = `key${++counter}.pem`;
    openssl(['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', file]);
    return fs.readFileSync(path.join(dir, file), 'utf8');
  }

  function sign(
    subject: string,
    keyPem: string,
    extensions: string,
    issuer: Issued | null,
    notBefore: Date,
    notAfter: Date,
    san?: string,
  ): Issued {
    const n = ++counter;
    fs.writeFileSync(path.join(dir, `subject${n}.key`), keyPem);
    openssl(['req', '-new', '-key', `subject${n}.key`, '-subj', `/CN=${subject}`, '-out', `req${n}.csr`]);
    const signer = issuer
      ? (() => {
          fs.writeFileSync(path.join(dir, `issuer${n}.crt`), issuer.certPem);
          fs.writeFileSync(path.join(dir, `issuer${n}.key`), issuer.keyPem);
          return ['-cert', `issuer${n}.crt`, '-keyfile', `issuer${n}.key`];
        })()
      : ['-selfsign', '-keyfile', `subject${n}.key`];
    openssl(
      [
        'ca',
        '-batch',
        '-notext',
        '-config',
        'ca.cnf',
        ...signer,
        '-in',
        `req${n}.csr`,
        '-out',
        `cert${n}.pem`,
        '-extensions',
        extensions,
        '-startdate',
        asn1Time(notBefore),
        '-enddate',
        asn1Time(notAfter),
      ],
      san,
    );
    return { certPem: fs.readFileSync(path.join(dir, `cert${n}.pem`), 'utf8'), keyPem };
  }

  const longAgo = new Date(now.getTime() - 30 * DAY);
  const farAhead = new Date(now.getTime() + 3650 * DAY);
  const root = sign('Hostplane Test Root CA', newKey('ec'), 'root_ext', null, longAgo, farAhead);
  const intermediate = sign(
    'Hostplane Test Intermediate CA',
    newKey('ec'),
    'intermediate_ext',
    root,
    longAgo,
    farAhead,
  );

  const sans = (names: string[]) => names.map((name) => `DNS:${name}`).join(',');

  return {
    root,
    intermediate,
    /** Another intermediate CA under the root, e.g. an expired one. */
    intermediateCa: (notBefore: Date, notAfter: Date) =>
      sign('Hostplane Other Intermediate CA', newKey('ec'), 'intermediate_ext', root, notBefore, notAfter),
    /** A certificate that is not a CA (and has no key usage limits), to issue from anyway. */
    nonCa: () => sign('Not A CA', newKey('ec'), 'plain_ext', intermediate, longAgo, farAhead),
    /** A self-signed end-entity certificate. */
    selfSigned: (names: string[]) =>
      sign(names[0] ?? 'self.invalid', newKey('ec'), 'self_signed_ext', null, longAgo, farAhead, sans(names)),
    /** A new private key that matches nothing issued. */
    newKey: (type: 'rsa' | 'ec' = 'rsa') => newKey(type),
    /** An end-entity certificate with the given DNS names (SANs), by default from the intermediate. */
    leaf(options: LeafOptions): Issued {
      const [first = 'leaf.invalid'] = options.names;
      return sign(
        first,
        newKey(options.keyType ?? 'rsa'),
        'leaf_ext',
        options.issuer ?? intermediate,
        options.notBefore ?? new Date(now.getTime() - DAY),
        options.notAfter ?? new Date(now.getTime() + 90 * DAY),
        sans(options.names),
      );
    },
  };
}

export type Pki = ReturnType<typeof createPki>;

/** L1: what the API takes. */
export const b64 = (text: string) => Buffer.from(text, 'utf8').toString('base64');
