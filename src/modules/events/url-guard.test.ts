import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  parseNetwork,
  parseTargetUrl,
  refusedAddress,
  resolveTarget,
  TargetRefused,
  targetPolicy,
} from './url-guard.js';

describe('issue 22 webhook SSRF guard (url-guard.ts)', () => {
  it('refuses loopback, private, link-local, metadata, unspecified and multicast addresses', () => {
    for (const a of [
      '127.0.0.1',
      '10.1.2.3',
      '172.16.0.1',
      '172.31.255.255',
      '192.168.1.1',
      '169.254.169.254',
      '169.254.1.1',
      '0.0.0.0',
      '224.0.0.1',
      '255.255.255.255',
      '::1',
      '::',
      'fc00::1',
      'fd00:ec2::254',
      'fe80::1',
      'ff02::1',
      '::ffff:127.0.0.1',
      '::ffff:10.0.0.1',
    ])
      assert.ok(refusedAddress(a), `${a} is refused`);
  });

  it('accepts public addresses', () => {
    for (const a of ['93.184.216.34', '8.8.8.8', '172.32.0.1', '2606:4700::1111', '::ffff:8.8.8.8'])
      assert.equal(refusedAddress(a), null, a);
  });

  it('checks the resolved address', async () => {
    await assert.rejects(resolveTarget('localhost', targetPolicy([])), TargetRefused);
    await assert.rejects(resolveTarget('[::1]', targetPolicy([])), TargetRefused);
    assert.equal((await resolveTarget('127.0.0.1', targetPolicy(['127.0.0.0/8']))).address, '127.0.0.1');
  });

  it('URL shape: http(s) only, no credentials', () => {
    assert.equal(typeof parseTargetUrl('ftp://example.com/'), 'string');
    assert.equal(typeof parseTargetUrl('https://u:p@example.com/'), 'string');
    assert.equal(typeof parseTargetUrl('not a url'), 'string');
    assert.ok(parseTargetUrl('https://example.com/hook') instanceof URL);
  });
});

describe('issue 28 finding 10: IPv6 forms that embed or reach a non-public IPv4 address are refused', () => {
  const refused = (address: string, pattern: RegExp) => {
    const why = refusedAddress(address);
    assert.ok(why, `${address} is refused`);
    assert.match(why, pattern, address);
  };

  it('issue 28 finding 10: IPv4-compatible (::/96), in hex and dotted form', () => {
    refused('::7f00:1', /IPv4-compatible form of 127\.0\.0\.1, a loopback/);
    refused('::127.0.0.1', /IPv4-compatible form of 127\.0\.0\.1/);
    refused('::a00:1', /IPv4-compatible form of 10\.0\.0\.1, a private/);
    refused('::a9fe:a9fe', /169\.254\.169\.254, a cloud metadata/);
    refused('::2', /IPv4-compatible form of 0\.0\.0\.2/);
  });

  it('issue 28 finding 10: IPv4-mapped (::ffff:0:0/96), also written in hex', () => {
    refused('::ffff:7f00:1', /IPv4-mapped form of 127\.0\.0\.1/);
    refused('::ffff:a9fe:a9fe', /169\.254\.169\.254/);
    refused('0:0:0:0:0:ffff:c0a8:0101', /192\.168\.1\.1, a private/);
  });

  it('issue 28 finding 10: IPv4-translated (SIIT, ::ffff:0:0:0/96)', () => {
    refused('::ffff:0:10.0.0.1', /IPv4-translated form of 10\.0\.0\.1/);
    refused('::ffff:0:7f00:1', /127\.0\.0\.1, a loopback/);
    refused('::ffff:0:169.254.169.254', /metadata/);
  });

  it('issue 28 finding 10: 6to4 (2002::/16) embedding a private, loopback or metadata IPv4', () => {
    refused('2002:a00:1::1', /6to4 form of 10\.0\.0\.1, a private/);
    refused('2002:7f00:1::', /6to4 form of 127\.0\.0\.1/);
    refused('2002:a9fe:a9fe::1', /6to4 form of 169\.254\.169\.254, a cloud metadata/);
    refused('2002:c0a8:101:1::1', /192\.168\.1\.1/);
    assert.equal(refusedAddress('2002:808:808::1'), null, '6to4 of a public IPv4 (8.8.8.8)');
  });

  it('issue 28 finding 10: NAT64 well-known prefix (64:ff9b::/96) judged by its IPv4; local-use (64:ff9b:1::/48) refused whole', () => {
    refused('64:ff9b::7f00:1', /NAT64 form of 127\.0\.0\.1/);
    refused('64:ff9b::10.1.2.3', /NAT64 form of 10\.1\.2\.3/);
    refused('64:ff9b::a9fe:a9fe', /metadata/);
    assert.equal(refusedAddress('64:ff9b::808:808'), null, 'NAT64 of a public IPv4 (DNS64 networks)');
    refused('64:ff9b:1::1', /NAT64 local-use/);
    refused('64:ff9b:1:a00::1', /NAT64 local-use/);
    refused('64:ff9b:1:ffff:ffff:ffff:ffff:ffff', /NAT64 local-use/);
  });

  it('issue 28 finding 10: Teredo (2001::/32), by its server and by its (obfuscated) client address', () => {
    // Server 10.0.0.1; client 8.8.8.8 (f7f7:f7f7 inverted).
    refused('2001:0:a00:1::f7f7:f7f7', /Teredo server form of 10\.0\.0\.1/);
    // Server 8.8.8.8; client 127.0.0.1 (80ff:fffe inverted).
    refused('2001:0:808:808::80ff:fffe', /Teredo client form of 127\.0\.0\.1/);
    // Client 169.254.169.254 (5601:5601 inverted).
    refused('2001:0:808:808::5601:5601', /metadata/);
    assert.equal(refusedAddress('2001:0:808:808::f7f7:f7f7'), null, 'public server and client');
  });

  it('issue 28 finding 10: zone-scoped and malformed addresses are refused', () => {
    refused('fe80::1%eth0', /zone-scoped/);
    refused('not-an-ip', /not an IP address/);
  });
});

describe('issue 29 defect 3: WEBHOOK_ALLOWED_NETWORKS never opens link-local or metadata unless named', () => {
  it('issue 29 defect 3: listed networks are opened, embedded forms included', () => {
    const policy = targetPolicy(['10.0.0.0/8', '127.0.0.1', 'fd12:3456::/32']);
    assert.equal(refusedAddress('10.9.8.7', policy), null);
    assert.equal(refusedAddress('127.0.0.1', policy), null);
    assert.equal(refusedAddress('::ffff:10.9.8.7', policy), null);
    assert.equal(refusedAddress('fd12:3456::1', policy), null);
    assert.ok(refusedAddress('127.0.0.2', policy));
    assert.ok(refusedAddress('192.168.1.1', policy));
    assert.ok(refusedAddress('fd00:ec2::254', policy));
  });

  it('issue 29 defect 3: the widest lists still refuse link-local and the metadata addresses', () => {
    const everything = targetPolicy(['0.0.0.0/0', '::/0']);
    assert.equal(refusedAddress('10.0.0.1', everything), null);
    assert.equal(refusedAddress('fd00::1', everything), null);
    for (const a of [
      '169.254.169.254',
      '169.254.1.1',
      'fe80::1',
      'fd00:ec2::254',
      '::ffff:169.254.169.254',
      '2002:a9fe:a9fe::1',
      '64:ff9b::a9fe:a9fe',
    ])
      assert.ok(refusedAddress(a, everything), `${a} is refused under 0.0.0.0/0, ::/0`);
    const fc = targetPolicy(['fc00::/7', '169.0.0.0/8']);
    assert.match(refusedAddress('fd00:ec2::254', fc) ?? '', /metadata/);
    assert.match(refusedAddress('169.254.169.254', fc) ?? '', /metadata/);
  });

  it('issue 29 defect 3: link-local opens through a link-local entry; a metadata address only when named exactly', () => {
    const linkLocal = targetPolicy(['169.254.0.0/16', 'fe80::/10']);
    assert.equal(refusedAddress('169.254.1.1', linkLocal), null);
    assert.equal(refusedAddress('fe80::1', linkLocal), null);
    assert.match(refusedAddress('169.254.169.254', linkLocal) ?? '', /metadata/);
    const named = targetPolicy(['169.254.169.254', 'fd00:ec2::254/128']);
    assert.equal(refusedAddress('169.254.169.254', named), null);
    assert.equal(refusedAddress('fd00:ec2::254', named), null);
    assert.ok(refusedAddress('169.254.1.1', named));
  });

  it('issue 29 defect 3: networks parse as CIDRs or bare addresses; anything else is refused', () => {
    assert.deepEqual(parseNetwork('10.0.0.0/8')?.prefix, 8);
    assert.deepEqual(parseNetwork('::1')?.prefix, 128);
    for (const bad of ['10.0.0.0/33', '10.0.0/8', 'fe80::/129', 'example.com', '10.0.0.0/8/1', ''])
      assert.equal(parseNetwork(bad), null, bad);
    assert.throws(() => targetPolicy(['nope']));
  });
});
