import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ident, tableIdent } from './database.js';
import { installSlug, keySlug } from './files.js';
import { createLimiter } from './limiter.js';

describe('local driver names (issue 16): nothing unchecked reaches a path or an SQL identifier', () => {
  it('derives hp_<hex> from an install id and refuses anything else', () => {
    assert.equal(installSlug('0F8FAD5B-D9CB-469F-A165-70867728950E'), 'hp_0f8fad5bd9cb469fa16570867728950e');
    for (const bad of ['../etc', 'x', '0f8fad5b-d9cb-469f-a165-70867728950e/..', '']) {
      assert.throws(() => installSlug(bad));
    }
  });

  it('accepts operation keys (<uuid> or <uuid>:<step>) only', () => {
    const id = '0f8fad5b-d9cb-469f-a165-70867728950e';
    assert.equal(keySlug(id), id);
    assert.equal(keySlug(`${id}:checkpoint`), `${id}.checkpoint`);
    for (const bad of [`${id}:../x`, `${id}/x`, 'a b', `${id}:checkpoint:x`])
      assert.throws(() => keySlug(bad));
  });

  it('quotes only driver database names and plain table names', () => {
    assert.equal(ident('hp_0f8fad5bd9cb469fa16570867728950e'), '`hp_0f8fad5bd9cb469fa16570867728950e`');
    assert.equal(ident('hps_0f8fad5bd9cb469fa16570867728950e'), '`hps_0f8fad5bd9cb469fa16570867728950e`');
    for (const bad of ['mysql', 'hp_x`; DROP DATABASE mysql; --', 'hp_0f8fad5b'])
      assert.throws(() => ident(bad));
    assert.equal(tableIdent('wp_posts'), '`wp_posts`');
    for (const bad of ['wp`posts', 'a.b', 'x y', '', 'a'.repeat(65)]) assert.throws(() => tableIdent(bad));
  });
});

describe('createLimiter', () => {
  it('runs at most `limit` tasks at once and hands a freed slot to the next in line', async () => {
    const limited = createLimiter(2);
    let running = 0;
    let peak = 0;
    const task = async () => {
      running++;
      peak = Math.max(peak, running);
      await new Promise((r) => setTimeout(r, 5));
      running--;
    };
    const signal = new AbortController().signal;
    await Promise.all(Array.from({ length: 7 }, () => limited(signal, task)));
    assert.equal(peak, 2);
  });

  it('a waiting task whose signal aborts gives up', async () => {
    const limited = createLimiter(1);
    let release = () => {};
    const first = limited(new AbortController().signal, () => new Promise<void>((r) => (release = r)));
    const controller = new AbortController();
    const second = limited(controller.signal, async () => 'ran');
    controller.abort();
    await assert.rejects(second, /gave up waiting/);
    release();
    await first;
  });
});
