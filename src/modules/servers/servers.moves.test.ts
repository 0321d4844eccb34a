import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { snapshotMismatch } from './servers.moves.jobs.js';

const snapshot = {
  wp_version: '6.7.1',
  file_bytes: 1000,
  db_tables: { wp_posts: 10, wp_options: 20 },
  checksums: { files: 'f', database: 'd' },
};

describe('issue 30: the check of a move (decision #178)', () => {
  it('issue 30: the same content matches, whatever the order of the tables and the files archive checksum', () => {
    const same = {
      ...snapshot,
      db_tables: { wp_options: 20, wp_posts: 10 },
      checksums: { files: 'other', database: 'd' },
    };
    assert.equal(snapshotMismatch(snapshot, same), null);
    assert.equal(snapshotMismatch({ ...snapshot, checksums: undefined }, same), null);
  });

  it('issue 30 (decision #197): with both dumps checksums, the sizes of the tables on disk do not count (a table loaded from a dump is laid out anew)', () => {
    assert.equal(
      snapshotMismatch(snapshot, { ...snapshot, db_tables: { wp_posts: 16384, wp_options: 20 } }),
      null,
    );
  });

  it('issue 30: files, tables and database checksums that differ are named', () => {
    assert.match(snapshotMismatch(snapshot, { ...snapshot, file_bytes: 999 }) ?? '', /files: 999 bytes/);
    const unsummed = { ...snapshot, checksums: undefined };
    assert.match(
      snapshotMismatch(unsummed, { ...unsummed, db_tables: { wp_posts: 10 } }) ?? '',
      /tables differ/,
    );
    assert.match(
      snapshotMismatch(snapshot, { ...snapshot, checksums: { files: 'f', database: 'x' } }) ?? '',
      /checksums differ/,
    );
  });
});
