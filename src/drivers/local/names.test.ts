import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ident, tableIdent } from './database.js';
import { installSlug, keySlug } from './names.js';

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
    // Issue 30: a move's keys and a cross-server copy's source backup.
    assert.equal(keySlug(`move:${id}:final-backup`), `move.${id}.final-backup`);
    assert.equal(keySlug(`${id}:copy-source`), `${id}.copy-source`);
    for (const bad of [
      `${id}:../x`,
      `${id}/x`,
      'a b',
      `${id}:checkpoint:x`,
      `move:${id}`,
      `moved:${id}:x`,
      `${id}:-x`,
    ])
      assert.throws(() => keySlug(bad));
  });

  it('quotes only driver database names and plain table names', () => {
    assert.equal(ident('hp_0f8fad5bd9cb469fa16570867728950e'), '`hp_0f8fad5bd9cb469fa16570867728950e`');
    assert.equal(ident('hps_0f8fad5bd9cb469fa16570867728950e'), '`hps_0f8fad5bd9cb469fa16570867728950e`');
    for (const bad of ['mysql', 'hp_x`; DROP DATABASE mysql; --', 'hp_0f8fad5b'])
      assert.throws(() => ident(bad));
    assert.equal(tableIdent('wp_posts'), '`wp_posts`');
    // Issue 28 finding 7: any name MariaDB allows is quoted (a backtick doubled), not refused.
    assert.equal(tableIdent('wp`posts'), '`wp``posts`');
    assert.equal(tableIdent('a.b c'), '`a.b c`');
    for (const bad of ['', 'a'.repeat(65), 'trailing ', 'nul\0', 'emoji\u{1F600}'])
      assert.throws(() => tableIdent(bad));
  });
});
