import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { loadConfig } from '../../config.js';
import { AppError } from '../../errors.js';
import { lookupTxt, type TxtResolver } from './txt-resolver.js';

const failing = (code: string): TxtResolver => ({
  resolveTxt: async () => {
    throw Object.assign(new Error(`queryTxt ${code}`), { code });
  },
});

describe('lookupTxt (D7: a failed lookup is never a false "not found")', () => {
  it('returns the records, or [] when the name or its TXT records do not exist', async () => {
    const records = [['a', 'b'], ['c']];
    assert.deepEqual(await lookupTxt({ resolveTxt: async () => records }, 'x.test'), records);
    assert.deepEqual(await lookupTxt(failing('ENOTFOUND'), 'x.test'), []);
    assert.deepEqual(await lookupTxt(failing('ENODATA'), 'x.test'), []);
  });

  for (const [code, status] of [
    ['ETIMEOUT', 503],
    ['ESERVFAIL', 503],
    ['EREFUSED', 503],
    ['ECONNREFUSED', 503],
    ['ECANCELLED', 503],
    ['EBADRESP', 502],
    ['EFORMERR', 502],
  ] as const) {
    it(`${code} is a ${status} naming the record`, async () => {
      await assert.rejects(lookupTxt(failing(code), '_hostplane-challenge.x.test'), (err: unknown) => {
        assert.ok(err instanceof AppError);
        assert.equal(err.status, status);
        assert.match(err.message, /_hostplane-challenge\.x\.test/);
        assert.match(err.message, new RegExp(code));
        return true;
      });
    });
  }
});

describe('DNS_SERVERS, DNS_TIMEOUT_MS, DNS_TRIES', () => {
  it('default to the system resolvers, 2000 ms and 2 tries', () => {
    assert.deepEqual(loadConfig({}).dns, { servers: [], timeoutMs: 2000, tries: 2 });
  });

  it('take ip[:port] and [ipv6]:port lists', () => {
    const config = loadConfig({
      DNS_SERVERS: '127.0.0.1:5353, 10.0.0.1,[::1]:53,::1',
      DNS_TIMEOUT_MS: '250',
    });
    assert.deepEqual(config.dns.servers, ['127.0.0.1:5353', '10.0.0.1', '[::1]:53', '::1']);
    assert.equal(config.dns.timeoutMs, 250);
  });

  it('refuse host names, bad ports and bad numbers, all reported at once', () => {
    assert.throws(
      () => loadConfig({ DNS_SERVERS: 'dns.example.test,1.2.3.4:99999', DNS_TRIES: '0' }),
      (err: Error) => {
        assert.match(err.message, /dns\.example\.test/);
        assert.match(err.message, /1\.2\.3\.4:99999/);
        assert.match(err.message, /DNS_TRIES/);
        return true;
      },
    );
  });
});
