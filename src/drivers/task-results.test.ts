import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DriverError } from './driver.js';
import { TASK_RESULTS, taskResults } from './task-results.js';

describe('stored task results (issue 20): checked against their kind before they are answered', () => {
  const resultOf = taskResults('local', TASK_RESULTS);

  it('answers a stored result of its kind as it was stored', () => {
    const snapshot = {
      wp_version: null,
      file_bytes: 10,
      db_tables: { wp_posts: 4096 },
      location: 'hp_0f8fad5bd9cb469fa16570867728950e/0f8fad5b-d9cb-469f-a165-70867728950e',
      checksums: { files: 'a', database: 'b' },
    };
    assert.deepEqual(resultOf('backup', 'backup:k', snapshot), snapshot);
    // A simulated snapshot has neither location nor checksums.
    assert.deepEqual(resultOf('backup', 'backup:k', { wp_version: '6.4', file_bytes: 0, db_tables: {} }), {
      wp_version: '6.4',
      file_bytes: 0,
      db_tables: {},
    });
    assert.deepEqual(resultOf('provision', 'provision:k', { wp_version: null, php_version: '8.2' }), {
      wp_version: null,
      php_version: '8.2',
    });
    assert.deepEqual(resultOf('purge_cache', 'purge_cache:k', {}), {});
  });

  it('refuses a stored result of another shape with a DriverError naming the driver, the task and the field', () => {
    const refused = (kind: Parameters<typeof resultOf>[0], stored: unknown, field: RegExp) =>
      assert.throws(
        () => resultOf(kind, `${kind}:0f8fad5b`, stored),
        (err: Error) => {
          assert.ok(err instanceof DriverError);
          assert.equal(err.operation, kind);
          assert.match(
            err.message,
            new RegExp(`^local task ${kind}:0f8fad5b: its stored result is not a ${kind} result`),
          );
          assert.match(err.message, field);
          return true;
        },
      );
    refused('measure_disk', { file_bytes: '12', database_bytes: 0 }, /file_bytes/);
    refused(
      'backup',
      { wp_version: null, file_bytes: 1, db_tables: { wp_posts: 'big' } },
      /db_tables\/wp_posts/,
    );
    refused('copy', { wp_version: null }, /copied_tables/);
    refused('provision', null, /\//);
    refused('move_site', { moved: true }, /moved/);
  });
});
