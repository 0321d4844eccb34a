// test-db: postgres (the subject is hostplane doctor and the start of serve without the web tier, which never use TEST_DB: docs/decisions.md #237)
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';

/**
 * Issue 21: `hostplane doctor` and the start of `serve` on a machine lacking the web tier's tools. The
 * compiled CLI runs in its own mount namespace where /usr/sbin (nginx, php-fpm8.2, useradd, userdel,
 * runuser) and /usr/share/wordpress are empty and /usr/bin/php8.2 is not executable: the machine's
 * real files stay as they are for every other process. Needs root (unshare); skipped without it.
 */
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hostplane-doctor-'));
after(() => fs.rmSync(tmp, { recursive: true, force: true }));

const canUnshare = spawnSync('unshare', ['-m', 'true']).status === 0;
const HIDE =
  'mount -t tmpfs none /usr/sbin && mount -t tmpfs none /usr/share/wordpress && ' +
  'mount --bind /dev/null /usr/bin/php8.2 && exec "$0" dist/cli.js "$@"';

/** Runs `hostplane <args>` with the web tier's tools hidden; answers its exit code and output. */
function withoutWebTools(args: string[]) {
  const dataDir = fs.mkdtempSync(path.join(tmp, 'data-'));
  const result = spawnSync('unshare', ['-m', 'sh', '-c', HIDE, process.execPath, ...args], {
    env: {
      PATH: process.env.PATH ?? '',
      DATA_DIR: dataDir,
      PORT: '0',
      HOST: '127.0.0.1',
      HOSTING_DRIVER: 'local',
      LOCAL_WEB: 'on',
      LOG_LEVEL: 'warn',
    },
    encoding: 'utf8',
    timeout: 60_000,
  });
  return { status: result.status, output: `${result.stdout}${result.stderr}`, dataDir };
}

const PACKAGES =
  /apt-get install -y nginx php8\.2-fpm php8\.2-cli php8\.2-mysql wordpress passwd util-linux$/m;

describe('hostplane doctor (issue 21)', { skip: canUnshare ? false : 'needs root for unshare -m' }, () => {
  it('with LOCAL_WEB=on and the web tier missing: exits 1 naming the Debian packages to install', () => {
    const { status, output } = withoutWebTools(['doctor']);
    assert.equal(status, 1, output);
    assert.match(output, /^FAIL\s+nginx\s+\/usr\/sbin\/nginx: not found$/m);
    assert.match(output, /^FAIL\s+WordPress core/m);
    // What is present still passes: the MariaDB tools and server of the test machine.
    assert.match(output, /^ok\s+mariadb-dump/m);
    assert.match(output, /^ok\s+MariaDB server at 127\.0\.0\.1:3306/m);
    assert.match(output, PACKAGES);
  });

  it('serve in the same configuration refuses to start with the same message, before opening the database', () => {
    const { status, output, dataDir } = withoutWebTools(['serve']);
    assert.equal(status, 1, output);
    assert.match(output, /system tools are not ready \(hostplane doctor\)/);
    assert.match(output, /^FAIL\s+nginx\s+\/usr\/sbin\/nginx: not found$/m);
    assert.match(output, PACKAGES);
    assert.doesNotMatch(output, /Hostplane is serving/);
    // Nothing long-lived was opened: no embedded database was made in DATA_DIR.
    assert.deepEqual(fs.readdirSync(dataDir), []);
  });

  it('the machine as it is (every tool installed): doctor exits 0', () => {
    const dataDir = fs.mkdtempSync(path.join(tmp, 'data-'));
    // A HOSTING_ROOT not made yet under a directory anyone may pass (the default one is the machine's).
    const hostingRoot = path.join(os.tmpdir(), `hostplane-doctor-unmade-${process.pid}`, 'hosting');
    const result = spawnSync(process.execPath, ['dist/cli.js', 'doctor'], {
      env: {
        PATH: process.env.PATH ?? '',
        DATA_DIR: dataDir,
        HOSTING_DRIVER: 'local',
        LOCAL_WEB: 'on',
        HOSTING_ROOT: hostingRoot,
      },
      encoding: 'utf8',
    });
    assert.equal(result.status, 0, `${result.stdout}${result.stderr}`);
    // Issue 28: the file checks too (HOSTING_ROOT passable, DATA_DIR, modes; nosuid may only warn).
    assert.match(result.stdout, /all 20 checks pass/);
    assert.match(result.stdout, /^ok\s+HOSTING_ROOT passable by the install users and nginx/m);
    assert.doesNotMatch(result.stdout, /apt-get/);
  });

  it('the simulated driver needs nothing: doctor exits 0', () => {
    const dataDir = fs.mkdtempSync(path.join(tmp, 'data-'));
    const result = spawnSync(process.execPath, ['dist/cli.js', 'doctor'], {
      env: { PATH: process.env.PATH ?? '', DATA_DIR: dataDir },
      encoding: 'utf8',
    });
    assert.equal(result.status, 0);
    assert.match(result.stdout, /hosting driver simulated: needs no system tools/);
  });
});
