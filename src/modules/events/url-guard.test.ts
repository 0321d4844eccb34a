import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseTargetUrl, refusedAddress, resolveTarget, TargetRefused } from './url-guard.js';

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

  it('checks the resolved address, unless private targets are allowed', async () => {
    await assert.rejects(resolveTarget('localhost', false), TargetRefused);
    await assert.rejects(resolveTarget('[::1]', false), TargetRefused);
    assert.equal((await resolveTarget('127.0.0.1', true)).address, '127.0.0.1');
  });

  it('URL shape: http(s) only, no credentials', () => {
    assert.equal(typeof parseTargetUrl('ftp://example.com/'), 'string');
    assert.equal(typeof parseTargetUrl('https://u:p@example.com/'), 'string');
    assert.equal(typeof parseTargetUrl('not a url'), 'string');
    assert.ok(parseTargetUrl('https://example.com/hook') instanceof URL);
  });
});
