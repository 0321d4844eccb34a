import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ident, tableIdent } from './database.js';

describe('database identifiers (issue 28 finding 7)', () => {
  it('issue 28 finding 7: any table name MariaDB allows is quoted, a backtick doubled', () => {
    assert.equal(tableIdent('wp_posts'), '`wp_posts`');
    assert.equal(tableIdent('wp_odd table'), '`wp_odd table`');
    assert.equal(tableIdent('wp_back`tick.ünï'), '`wp_back``tick.ünï`');
    assert.equal(tableIdent('`'), '````');
    assert.equal(tableIdent('x'.repeat(64)), `\`${'x'.repeat(64)}\``);
    assert.equal(tableIdent('é'.repeat(64)), `\`${'é'.repeat(64)}\``, '64 characters, not bytes');
  });

  it('issue 28 finding 7: names MariaDB refuses are refused before they reach SQL', () => {
    for (const name of ['', 'x'.repeat(65), 'trailing ', 'nul\0byte', 'emoji 😀'])
      assert.throws(() => tableIdent(name), /unsupported table name/, JSON.stringify(name));
  });

  it("the driver's own names: hp_, hps_, hpt_ and hpr_ with 32 hex digits only", () => {
    const hex = '0123456789abcdef0123456789abcdef';
    for (const p of ['hp_', 'hps_', 'hpt_', 'hpr_']) assert.equal(ident(`${p}${hex}`), `\`${p}${hex}\``);
    for (const bad of [`hpx_${hex}`, `hp_${hex}\``, 'hp_1', `hp_${hex.toUpperCase()}`])
      assert.throws(() => ident(bad), /not a driver database name/);
  });
});
