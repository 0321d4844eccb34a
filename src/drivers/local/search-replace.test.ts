import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { urlPairs } from './search-replace.js';

/** The pairs applied in order, as the script applies them (without its look-ahead at the host name's end). */
const apply = (pairs: [string, string][], text: string) => {
  let out = text;
  for (const [a, b] of pairs) out = out.split(a).join(b);
  return out;
};

describe('copy URL rewrite pairs (C1-C4, issue 21)', () => {
  const ports = { http: 8080, https: 8443 };

  it('covers every host name of the source, both schemes with and without their ports, to the destination URL', () => {
    const pairs = urlPairs(
      ['prod.test', 'www.shop.example', 'old.shop.example'],
      ports,
      'https://staging.shop.example:8443',
    );
    const from = pairs.map(([a]) => a);
    for (const name of ['prod.test', 'www.shop.example', 'old.shop.example']) {
      for (const form of [`http://${name}:8080`, `https://${name}:8443`, `http://${name}`, `https://${name}`])
        assert.ok(from.includes(form), form);
      assert.ok(from.includes(`//${name}:8080`));
      assert.ok(from.includes(`//${name}`));
      assert.ok(from.includes(`http:\\/\\/${name}:8080`), 'JSON-escaped too');
    }
    for (const [a, b] of pairs) {
      if (a.startsWith('http')) assert.equal(b.replaceAll('\\/', '/'), 'https://staging.shop.example:8443');
      else assert.equal(b.replaceAll('\\/', '/'), '//staging.shop.example:8443');
    }
  });

  it('orders the absolute forms before the scheme-relative ones and a port before its absence', () => {
    const pairs = urlPairs(['prod.test'], ports, 'http://stage.test:8080');
    const at = (s: string) => pairs.findIndex(([a]) => a === s);
    assert.ok(at('http://prod.test:8080') < at('http://prod.test'));
    assert.ok(at('https://prod.test') < at('//prod.test:8080'));
    assert.ok(at('//prod.test:8080') < at('//prod.test'));
    // An http link becomes the destination's URL (its scheme), a scheme-relative one keeps none.
    assert.equal(
      apply(pairs, 'see https://prod.test:8443/a and //prod.test:8080/x.png'),
      'see http://stage.test:8080/a and //stage.test:8080/x.png',
    );
  });

  it('default ports add no port forms; wildcard names and pairs that change nothing are left out', () => {
    const pairs = urlPairs(
      ['*.prod.test', 'prod.test', 'stage.test'],
      { http: 80, https: 443 },
      'http://stage.test',
    );
    const from = pairs.map(([a]) => a);
    assert.equal(
      from.some((a) => a.includes('*')),
      false,
    );
    assert.equal(
      from.some((a) => /:\d/.test(a.replace(/^https?:/, ''))),
      false,
    );
    assert.ok(pairs.every(([a, b]) => a !== b));
    assert.equal(new Set(from).size, from.length);
  });
});
