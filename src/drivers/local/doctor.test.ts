import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { loadConfig } from '../../config.js';
import { type DoctorProbe, doctorChecks, doctorReport, failing, missingPackages } from './doctor.js';

/** A machine where every tool answers, except the commands and paths named missing. */
function fakeProbe(
  missing: string[],
  root = true,
  files: {
    modes?: Record<string, number>;
    dirs?: Record<string, string[]>;
    mounts?: string;
    texts?: Record<string, string>;
  } = {},
): DoctorProbe {
  return {
    readText: (p) => files.texts?.[p] ?? null,
    stat: (p) => {
      // The hosting root's own paths exist only when given; what is above it is 0755.
      const mode = files.modes?.[p] ?? (p.startsWith('/srv/hosting') ? null : 0o755);
      return mode === null ? null : { mode, uid: 0 };
    },
    list: (dir) => files.dirs?.[dir] ?? [],
    mountInfo: () => files.mounts ?? '22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n',
    output: async (command, args) => {
      if (missing.includes(command)) throw new Error('not found');
      if (args.includes('-m')) return missing.includes('mysqli') ? 'Core\npdo\n' : 'Core\nmysqli\n';
      return `${command} 1.0\n`;
    },
    exists: (path) => !missing.some((m) => path.startsWith(m)),
    isRoot: () => root,
  };
}

const local = (web: boolean, root = '/srv/hosting') =>
  loadConfig({
    DATA_DIR: '/tmp/x',
    HOSTING_DRIVER: 'local',
    HOSTING_ROOT: root,
    ...(web && { LOCAL_WEB: 'on' }),
  }).driver;

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

  it('issue 29 defect 2: a directory above HOSTING_ROOT others cannot pass fails, naming it and the fix', async () => {
    const checks = await doctorChecks(
      local(true, '/tmp/closed/hosting'),
      fakeProbe([], true, { modes: { '/tmp/closed': 0o700 } }),
    );
    const pass = checks.find((c) => c.name.startsWith('HOSTING_ROOT passable'));
    assert.equal(pass?.ok, false);
    assert.match(pass?.detail ?? '', /\/tmp\/closed \(0700\).*chmod o\+x \/tmp\/closed/);
    assert.deepEqual(
      checks.filter(failing).map((c) => c.name),
      [pass?.name],
    );
    // Without LOCAL_WEB no install user needs to pass.
    const files = await doctorChecks(
      local(false, '/tmp/closed/hosting'),
      fakeProbe([], true, { modes: { '/tmp/closed': 0o700 } }),
    );
    assert.ok(files.every((c) => c.ok));
  });

  it('issue 28: with modes, DATA_DIR, backups, logs and install trees too open fail; HOSTING_ROOT without nosuid warns and says how', async () => {
    const root = '/srv/hosting';
    const slug = `hp_${'a'.repeat(32)}`;
    const probe = fakeProbe([], true, {
      modes: {
        '/tmp/x': 0o755,
        [`${root}/backups`]: 0o755,
        [`${root}/web/logs`]: 0o755,
        [`${root}/installs/${slug}/public`]: 0o755,
      },
      dirs: { [`${root}/installs`]: [slug, 'not-an-install'] },
    });
    const checks = await doctorChecks(local(true, root), probe, { dataDir: '/tmp/x', modes: true });
    const named = (prefix: string) => checks.find((c) => c.name.startsWith(prefix));
    assert.match(named('DATA_DIR')?.detail ?? '', /0755: chmod 700 \/tmp\/x/);
    assert.equal(named('DATA_DIR')?.ok, false);
    const modes = named('HOSTING_ROOT modes');
    assert.equal(modes?.ok, false);
    assert.match(modes?.detail ?? '', /backups is 0755 \(want 0700\)/);
    assert.match(modes?.detail ?? '', /logs is 0755 \(want 0700\)/);
    assert.match(modes?.detail ?? '', new RegExp(`${slug}/public is 0755`));
    const nosuid = named('HOSTING_ROOT mounted nosuid');
    assert.equal(nosuid?.warning, true);
    assert.match(nosuid?.detail ?? '', /mount -o remount,bind,nosuid,nodev \/srv\/hosting/);
    const report = doctorReport(local(true, root), checks);
    assert.match(report, /^WARN\s+HOSTING_ROOT mounted nosuid/m);
    assert.match(report, /2 of \d+ checks fail \(1 warning\)$/m);
    assert.equal(named("PHP-FPM masters' umask")?.ok, true, 'not running: nothing to say');
    assert.deepEqual(missingPackages(checks), []);

    // The same machine as the tenant model wants it: everything passes, nosuid on its own mount.
    const good = fakeProbe([], true, {
      modes: {
        '/tmp/x': 0o700,
        [root]: 0o711,
        [`${root}/backups`]: 0o700,
        [`${root}/staging`]: 0o711,
        [`${root}/web/logs`]: 0o700,
        [`${root}/web/sites`]: 0o700,
        [`${root}/web/pools`]: 0o700,
        [`${root}/web`]: 0o711,
        [`${root}/web/run`]: 0o711,
        [`${root}/web/tmp`]: 0o711,
        [`${root}/web/cache`]: 0o711,
        [`${root}/installs`]: 0o711,
        [`${root}/installs/${slug}/public`]: 0o750,
      },
      dirs: { [`${root}/installs`]: [slug] },
      mounts:
        '22 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw\n40 22 8:2 / /srv/hosting rw,nosuid,nodev - ext4 /dev/sda2 rw\n',
    });
    const fine = await doctorChecks(local(true, root), good, { dataDir: '/tmp/x', modes: true });
    // Decision 251: each install's master is checked, and an earlier version's shared one.
    const old = fakeProbe([], true, {
      texts: {
        [`${root}/web/run/php-fpm.pid`]: '4242\n',
        '/proc/4242/status': 'Name:\tphp-fpm8.2\nUmask:\t0022\n',
        [`${root}/web/run/php-fpm.${slug}.pid`]: '4343\n',
        '/proc/4343/status': 'Name:\tphp-fpm8.2\nUmask:\t0027\n',
      },
      dirs: { [`${root}/web/run`]: ['nginx.pid', 'php-fpm.pid', `php-fpm.${slug}.pid`] },
    });
    const umask = (await doctorChecks(local(true, root), old, { modes: true })).find((c) =>
      c.name.startsWith("PHP-FPM masters' umask"),
    );
    assert.equal(umask?.warning, true);
    assert.match(umask?.detail ?? '', /^pid 4242: 0022: .*kill -QUIT 4242/);
    const own = fakeProbe([], true, {
      texts: {
        [`${root}/web/run/php-fpm.${slug}.pid`]: '4343\n',
        '/proc/4343/status': 'Name:\tphp-fpm8.2\nUmask:\t0027\n',
      },
      dirs: { [`${root}/web/run`]: [`php-fpm.${slug}.pid`] },
    });
    const ownUmask = (await doctorChecks(local(true, root), own, { modes: true })).find((c) =>
      c.name.startsWith("PHP-FPM masters' umask"),
    );
    assert.deepEqual([ownUmask?.ok, ownUmask?.detail], [true, '1 running: 0027']);
    assert.deepEqual(
      fine.filter((c) => !c.ok).map((c) => `${c.name}: ${c.detail}`),
      [],
    );
  });
});
