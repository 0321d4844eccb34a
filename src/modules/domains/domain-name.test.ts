import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  normalizeDomainName,
  txtRecordsMatch,
  verificationBase,
  verificationRecordName,
} from './domain-name.js';

const ok = (input: string, reserved?: string) => {
  const result = normalizeDomainName(input, reserved);
  assert.ok(result.ok, `${input}: ${result.ok ? '' : result.message}`);
  return result;
};
const code = (input: string, reserved?: string) => {
  const result = normalizeDomainName(input, reserved);
  assert.ok(!result.ok, `${input} should be refused`);
  return result.code;
};

describe('normalizeDomainName', () => {
  it('lower-cases, trims and drops one trailing dot', () => {
    assert.equal(ok('  WWW.Example.COM. ').name, 'www.example.com');
  });

  it('issue 21: refuses whitespace, control characters and punctuation instead of dropping them (they would reach nginx)', () => {
    for (const bad of [
      'a\tb.example.com',
      'a\nb.example.com',
      'example.com\n',
      'a\u00adb.example.com',
      'a\u200bb.example.com',
      'a b.example.com',
      'a\u3000b.example.com',
    ])
      assert.equal(code(bad), 'invalid_domain_name', JSON.stringify(bad));
    for (const bad of [
      'a;b.example.com',
      'a{b}.example.com',
      'a"b.example.com',
      "a'b.example.com",
      '$host.example.com',
      'a\\b.example.com',
      'a_b.example.com',
      'a@b.example.com',
      '#a.example.com',
    ])
      assert.equal(code(bad), 'invalid_characters', JSON.stringify(bad));
  });

  it('converts an IDN to punycode (any case), and accepts valid punycode as given', () => {
    assert.equal(ok('münchen.de').name, 'xn--mnchen-3ya.de');
    assert.equal(ok('MÜNCHEN.DE').name, 'xn--mnchen-3ya.de');
    assert.equal(ok('shop.straße.de').name, 'shop.xn--strae-oqa.de');
    assert.equal(ok('xn--mnchen-3ya.de').name, 'xn--mnchen-3ya.de');
    assert.equal(code('xn--zz.com'), 'invalid_domain_name');
  });

  it('recognises a wildcard only as the whole first label, over at least two labels', () => {
    const wildcard = ok('*.Example.com');
    assert.equal(wildcard.name, '*.example.com');
    assert.equal(wildcard.wildcard, true);
    assert.equal(ok('example.com').wildcard, false);
    assert.equal(code('*.com'), 'invalid_wildcard');
    assert.equal(code('www.*.example.com'), 'invalid_wildcard');
    assert.equal(code('w*.example.com'), 'invalid_wildcard');
    assert.equal(code('*'), 'invalid_wildcard');
  });

  it('applies label and length rules', () => {
    assert.equal(code('localhost'), 'single_label_name');
    assert.equal(code(''), 'invalid_domain_name');
    assert.equal(code('a..b.com'), 'invalid_domain_name');
    assert.equal(code('-a.com'), 'invalid_characters');
    assert.equal(code('a-.com'), 'invalid_characters');
    assert.equal(code('a_b.com'), 'invalid_characters');
    assert.equal(code('exa mple.com'), 'invalid_domain_name');
    assert.equal(code(`${'a'.repeat(64)}.com`), 'label_too_long');
    ok(`${'a'.repeat(63)}.com`);
    const long = `${Array.from({ length: 4 }, () => 'a'.repeat(60)).join('.')}.com`;
    assert.equal(long.length, 247);
    ok(long);
    assert.equal(code(`abcdefg.${long}`), 'name_too_long');
  });

  it('refuses IP addresses and numeric top-level labels, also in full-width digits', () => {
    assert.equal(code('192.168.0.1'), 'invalid_domain_name');
    assert.equal(code('１２７.０.０.１'), 'invalid_domain_name');
    assert.equal(code('example.123'), 'invalid_domain_name');
    ok('123.example.com');
  });

  it('refuses names equal to or under the platform domain', () => {
    assert.equal(code('hostplane.app', 'hostplane.app'), 'reserved_domain');
    assert.equal(code('Foo.Hostplane.App', 'hostplane.app'), 'reserved_domain');
    ok('myhostplane.app', 'hostplane.app');
  });
});

describe('TXT verification helpers', () => {
  it('places the record under a fixed label; a wildcard is verified on its base name', () => {
    assert.equal(verificationRecordName('example.com'), '_hostplane-challenge.example.com');
    assert.equal(verificationRecordName('*.example.com'), '_hostplane-challenge.example.com');
    assert.equal(verificationBase('*.shop.example.com'), 'shop.example.com');
  });

  it('joins the character-strings of a record before comparing, and accepts the value as a token', () => {
    const value = 'hostplane-verification=abc';
    assert.ok(txtRecordsMatch([['other'], [value]], value));
    assert.ok(txtRecordsMatch([['hostplane-verif', 'ication=abc']], value));
    assert.ok(txtRecordsMatch([[`${'x'.repeat(250)} hostp`, 'lane-verification=abc more']], value));
    assert.ok(!txtRecordsMatch([['hostplane-verification=abcd']], value));
    assert.ok(!txtRecordsMatch([['hostplane-verif'], ['ication=abc']], value));
    assert.ok(!txtRecordsMatch([], value));
  });
});
