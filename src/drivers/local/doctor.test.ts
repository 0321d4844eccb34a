import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { loadConfig } from '../../config.js';
import { type DoctorProbe, doctorChecks, doctorReport, missingPackages } from './doctor.js';

/** A machine where every tool answers, except the commands and paths named missing. */
function fakeProbe(missing: string[], root = true): DoctorProbe {
  return {
    output: async (command, args) => {
      if (missing.includes(command)) throw new Error('not found');
      if (args.includes('-m')) return missing.includes('mysqli') ? 'Core\npdo\n' : 'Core\nmysqli\n';
      return `${command} 1.0\n`;
    },
    exists: (path) => !missing.some((m) => path.startsWith(m)),
    isRoot: () => root,
  };
}

const local = (web: boolean) =>
  loadConfig({ DATA_DIR: '/tmp/x', HOSTING_DRIVER: 'local', ...(web && { LOCAL_WEB: 'on' }) }).driver;

describe('hostplane doctor checks (issue 21)', () => {
  it('missing nginx fails its check and names the nginx package in the apt-get line', async () => {
    const checks = await doctorChecks(local(true), fakeProbe(['/usr/sbin/nginx']));
    const nginx = checks.find((c) => c.name === 'nginx');
    assert.equal(nginx?.ok, false);
    assert.deepEqual(missingPackages(checks), ['nginx']);
    assert.match(doctorReport(local(true), checks), /apt-get install -y nginx$/m);
    assert.equal(checks.filter((c) => !c.ok).length, 1);
  });

  it('maps each missing tool to its Debian package, once each', async () => {
    const checks = await doctorChecks(
      local(true),
      fakeProbe([
        '/usr/sbin/php-fpm8.2',
        'mysqli',
        '/usr/share/wordpress',
        'useradd',
        'userdel',
        'mariadb-dump',
      ]),
    );
    assert.deepEqual(missingPackages(checks), [
      'mariadb-client',
      'php8.2-fpm',
      'php8.2-mysql',
      'wordpress',
      'passwd',
    ]);
  });

  it('LOCAL_WEB=on needs root; not root fails without naming a package', async () => {
    const checks = await doctorChecks(local(true), fakeProbe([], false));
    assert.deepEqual(
      checks.filter((c) => !c.ok).map((c) => c.name),
      ['running as root (LOCAL_WEB=on: system users, daemons)'],
    );
    assert.deepEqual(missingPackages(checks), []);
  });

  it('without LOCAL_WEB only tar and the MariaDB tools and server are checked', async () => {
    const checks = await doctorChecks(local(false), fakeProbe(['/usr/sbin/nginx']));
    assert.ok(checks.every((c) => c.ok));
    assert.equal(checks.length, 4);
  });

  it('the simulated driver needs nothing', async () => {
    const driver = loadConfig({ DATA_DIR: '/tmp/x' }).driver;
    assert.deepEqual(await doctorChecks(driver, fakeProbe(['tar'])), []);
    assert.match(doctorReport(driver, []), /needs no system tools/);
  });
});
