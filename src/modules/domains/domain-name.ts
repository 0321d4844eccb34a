import { domainToASCII } from 'node:url';

/** Longest DNS name in presentation form without the trailing dot (RFC 1035: 255 octets on the wire). */
export const MAX_NAME_LENGTH = 253;
const MAX_LABEL_LENGTH = 63;
const LABEL = /^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/;

/** The label under which a domain's TXT ownership record lives (D7): `_hostplane-challenge.<domain>`. */
export const VERIFICATION_LABEL = '_hostplane-challenge';
/** Prefix of every TXT verification value; the rest is 32 random bytes, base64url. */
export const VERIFICATION_VALUE_PREFIX = 'hostplane-verification=';

export type DomainNameResult =
  | { ok: true; name: string; wildcard: boolean }
  | { ok: false; code: string; message: string };

const fail = (code: string, message: string): DomainNameResult => ({ ok: false, code, message });

/**
 * Validates and normalises a domain name: trims, drops one trailing dot, converts an IDN to punycode
 * and lower-cases it (WHATWG `domainToASCII`), then applies the hostname rules: at least two labels,
 * labels of 1-63 letters, digits and inner hyphens, at most 253 characters, a non-numeric top-level
 * label (so no IP addresses). A wildcard is `*.` followed by a name of at least two labels; `*`
 * anywhere else is refused. Names equal to or under `reservedSuffix` (the install cnames' domain)
 * belong to the platform.
 */
export function normalizeDomainName(input: string, reservedSuffix?: string): DomainNameResult {
  // Spaces around the name are dropped; any other whitespace, control or format character, or ASCII
  // punctuation but `.`, `-` and `*`, is refused here: the IDN mapping below would silently drop a
  // tab, a newline or a soft hyphen, and these names end up in the web server's configuration.
  let raw = input.replace(/^ +| +$/g, '');
  if (/[\p{Cc}\p{Cf}\p{Z}]/u.test(raw)) {
    return fail('invalid_domain_name', `${JSON.stringify(input)} holds whitespace or a control character`);
  }
  if (/[^\p{L}\p{M}\p{N}.*-]/u.test(raw)) {
    return fail(
      'invalid_characters',
      `${JSON.stringify(input)} holds a character a domain name may not: only letters, digits, "-" and "." (and "*." first)`,
    );
  }
  if (raw.endsWith('.')) raw = raw.slice(0, -1);
  if (raw === '') return fail('invalid_domain_name', 'Domain name is empty');
  const wildcard = raw.startsWith('*.');
  const rest = wildcard ? raw.slice(2) : raw;
  if (rest.includes('*')) {
    return fail('invalid_wildcard', `"${input}": a wildcard is only allowed as the whole first label ("*.")`);
  }
  const ascii = /^[\x21-\x7e]*$/.test(rest) ? rest.toLowerCase() : domainToASCII(rest);
  if (ascii === '' || ascii.includes('..') || ascii.startsWith('.')) {
    return fail('invalid_domain_name', `"${input}" is not a valid domain name`);
  }
  const labels = ascii.split('.');
  if (labels.length < 2) {
    return wildcard
      ? fail('invalid_wildcard', `"${input}": a wildcard needs at least two labels after "*."`)
      : fail('single_label_name', `"${input}" needs at least two labels (e.g. example.com)`);
  }
  for (const label of labels) {
    if (label.length > MAX_LABEL_LENGTH) {
      return fail('label_too_long', `"${input}": the label "${label}" is longer than ${MAX_LABEL_LENGTH}`);
    }
    if (!LABEL.test(label)) {
      return fail(
        'invalid_characters',
        `"${input}": the label "${label}" may hold only letters, digits and inner hyphens`,
      );
    }
  }
  if (/^[0-9]+$/.test(labels[labels.length - 1] ?? '')) {
    return fail('invalid_domain_name', `"${input}" is an IP address or has a numeric top-level label`);
  }
  if (ascii.startsWith('xn--') || ascii.includes('.xn--')) {
    // Punycode given directly must decode: domainToASCII refuses malformed A-labels.
    if (domainToASCII(ascii) !== ascii) {
      return fail('invalid_domain_name', `"${input}" holds a malformed punycode label`);
    }
  }
  const name = wildcard ? `*.${ascii}` : ascii;
  if (name.length > MAX_NAME_LENGTH) {
    return fail('name_too_long', `"${input}" is longer than ${MAX_NAME_LENGTH} characters once encoded`);
  }
  if (reservedSuffix && (ascii === reservedSuffix || ascii.endsWith(`.${reservedSuffix}`))) {
    return fail('reserved_domain', `"${input}" is under ${reservedSuffix}, which belongs to the platform`);
  }
  return { ok: true, name, wildcard };
}

export const isWildcard = (name: string) => name.startsWith('*.');

/** The name whose ownership a TXT record proves: a wildcard is proven on its base name. */
export const verificationBase = (name: string) => (isWildcard(name) ? name.slice(2) : name);

/** D7: where the TXT record of a domain lives. */
export const verificationRecordName = (name: string) => `${VERIFICATION_LABEL}.${verificationBase(name)}`;

/**
 * D7: whether one of the TXT records holds the value. A record's character-strings (each at most 255
 * bytes) are joined first; the record matches when its text, or one of its whitespace-separated
 * tokens, equals the value exactly.
 */
export function txtRecordsMatch(records: string[][], value: string): boolean {
  return records.some((strings) => {
    const text = strings.join('').trim();
    return text === value || text.split(/\s+/).includes(value);
  });
}
