import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { ConfigError, defaultHostingRoot, loadConfig } from './config.js';

function problemsOf(env: Record<string, string>): string[] {
  try {
    loadConfig(env);
  } catch (err) {
    assert.ok(err instanceof ConfigError, String(err));
    return err.problems;
  }
  assert.fail(`no ConfigError for ${JSON.stringify(env)}`);
}

describe('loadConfig', () => {
  it('uses the documented defaults when nothing is set (design.md, Configuration)', () => {
    const config = loadConfig({});
    assert.equal(config.port, 8080);
    assert.equal(config.host, '0.0.0.0');
    assert.equal(config.dataDir, path.resolve('./data'));
    assert.deepEqual(config.db, {
      kind: 'pglite',
      dir: path.join(path.resolve('./data'), 'pg'),
      wasm: 'baseline',
    });
    assert.equal(config.publicUrl, null);
    assert.equal(config.adminToken, null);
    assert.equal(config.secretKey, null);
    assert.equal(config.rateLimitPerMinute, 1200);
    assert.equal(config.redisUrl, null);
    assert.equal(config.logLevel, 'info');
    assert.equal(config.bodyLimitBytes, 1024 * 1024);
    assert.equal(config.installDomain, 'hostplane.app');
    assert.equal(config.authCacheSeconds, 10);
    assert.ok(Object.isFrozen(config));
  });

  it('treats empty variables as unset', () => {
    const config = loadConfig({
      PORT: '',
      DATABASE_URL: '',
      LOG_LEVEL: '',
      RATE_LIMIT_PER_MINUTE: '',
      REDIS_URL: '',
    });
    assert.equal(config.port, 8080);
    assert.equal(config.db.kind, 'pglite');
    assert.equal(config.logLevel, 'info');
    assert.equal(config.rateLimitPerMinute, 1200);
    assert.equal(config.redisUrl, null);
  });

  it('reads every variable', () => {
    const config = loadConfig({
      PORT: '9090',
      HOST: '127.0.0.1',
      DATA_DIR: '/srv/hostplane',
      DATABASE_URL: 'postgresql://u:p@db:5432/hostplane',
      PUBLIC_URL: 'https://api.example.test/',
      HOSTPLANE_ADMIN_TOKEN: 'a'.repeat(16),
      HOSTPLANE_SECRET_KEY: 'k'.repeat(32),
      RATE_LIMIT_PER_MINUTE: '0',
      REDIS_URL: 'rediss://cache:6380',
      LOG_LEVEL: 'warn',
      BODY_LIMIT_BYTES: '4096',
      INSTALL_DOMAIN: 'wp.example.test',
      AUTH_CACHE_SECONDS: '0',
    });
    assert.equal(config.port, 9090);
    assert.equal(config.host, '127.0.0.1');
    assert.equal(config.dataDir, path.resolve('/srv/hostplane'));
    assert.deepEqual(config.db, { kind: 'postgres', url: 'postgresql://u:p@db:5432/hostplane' });
    assert.equal(config.publicUrl, 'https://api.example.test', 'trailing slash removed');
    assert.equal(config.rateLimitPerMinute, 0, '0 turns limits off');
    assert.equal(config.redisUrl, 'rediss://cache:6380');
    assert.equal(config.logLevel, 'warn');
    assert.equal(config.bodyLimitBytes, 4096);
    assert.equal(config.installDomain, 'wp.example.test');
    assert.equal(config.authCacheSeconds, 0);
  });

  it('reports every malformed variable in one ConfigError', () => {
    const env = {
      PORT: 'eighty',
      DATABASE_URL: 'mysql://db/hostplane',
      PUBLIC_URL: 'not a url',
      HOSTPLANE_ADMIN_TOKEN: 'short',
      HOSTPLANE_SECRET_KEY: 'also-short',
      RATE_LIMIT_PER_MINUTE: '-5',
      REDIS_URL: 'http://cache:6379',
      LOG_LEVEL: 'verbose',
      BODY_LIMIT_BYTES: '10',
      INSTALL_DOMAIN: 'Not_A_Domain',
      AUTH_CACHE_SECONDS: '1.5',
    };
    let error: unknown;
    try {
      loadConfig(env);
    } catch (err) {
      error = err;
    }
    assert.ok(error instanceof ConfigError);
    assert.equal(error.problems.length, Object.keys(env).length, error.message);
    for (const name of Object.keys(env)) {
      assert.equal(
        error.problems.filter((p) => p.startsWith(`${name} `)).length,
        1,
        `${name}: ${error.message}`,
      );
      assert.ok(error.message.includes(name), name);
    }
    // The message lists the problems one per line, for the terminal.
    assert.equal(error.message.split('\n').length, Object.keys(env).length + 1);
    // A secret's value is never echoed.
    assert.ok(!error.message.includes('also-short'));
    assert.ok(!error.message.includes('"short"'));
  });

  for (const [name, value] of [
    ['PORT', '65536'],
    ['PORT', '0x50'],
    ['PORT', '8e3'],
    ['PORT', ' 8080'],
    ['PORT', '80.0'],
    ['RATE_LIMIT_PER_MINUTE', '1e3'],
    ['RATE_LIMIT_PER_MINUTE', '99999999999999999999'],
    ['BODY_LIMIT_BYTES', '1023'],
    ['BODY_LIMIT_BYTES', String(64 * 1024 * 1024 + 1)],
    ['AUTH_CACHE_SECONDS', '3601'],
    ['LOG_LEVEL', 'INFO'],
    ['DATABASE_URL', 'postgres//missing-colon'],
    ['PUBLIC_URL', 'ftp://files.example.test'],
    ['REDIS_URL', 'cache:6379'],
    ['INSTALL_DOMAIN', 'localhost'],
    ['INSTALL_DOMAIN', '-bad.example'],
  ] as const) {
    it(`rejects ${name}=${JSON.stringify(value)} with a problem naming the variable`, () => {
      const problems = problemsOf({ [name]: value });
      assert.equal(problems.length, 1, problems.join('; '));
      assert.ok(problems[0]?.startsWith(`${name} `), problems[0]);
    });
  }

  it('accepts the edges of every range', () => {
    const low = loadConfig({
      PORT: '0',
      RATE_LIMIT_PER_MINUTE: '0',
      BODY_LIMIT_BYTES: '1024',
      AUTH_CACHE_SECONDS: '0',
    });
    assert.deepEqual(
      [low.port, low.rateLimitPerMinute, low.bodyLimitBytes, low.authCacheSeconds],
      [0, 0, 1024, 0],
    );
    const high = loadConfig({
      PORT: '65535',
      RATE_LIMIT_PER_MINUTE: '10000000',
      BODY_LIMIT_BYTES: String(64 * 1024 * 1024),
      AUTH_CACHE_SECONDS: '3600',
    });
    assert.deepEqual(
      [high.port, high.rateLimitPerMinute, high.bodyLimitBytes, high.authCacheSeconds],
      [65535, 10_000_000, 64 * 1024 * 1024, 3600],
    );
  });
  it('issue 9: worker leases and database budgets default to 3 s / 10 s and 1 s / 1.5 s / 15 s / 4.5 s', () => {
    const config = loadConfig({});
    assert.equal(config.jobs.heartbeatSeconds, 3);
    assert.equal(config.jobs.leaseSeconds, 10);
    assert.deepEqual(config.dbBudget, {
      acquireTimeoutMs: 1500,
      apiStatementTimeoutMs: 1500,
      jobStatementTimeoutMs: 15_000,
    });
    assert.equal(config.requestTimeoutMs, 0);
  });

  it('issue 20 defect 7: HTTP timeouts default to headers 15 s, request 30 s, keep-alive 72 s, drain 32 MB / 10 s; they must nest', () => {
    assert.deepEqual(loadConfig({}).http, {
      headersTimeoutMs: 15_000,
      requestTimeoutMs: 30_000,
      keepAliveTimeoutMs: 72_000,
      drainBytes: 32 * 1024 * 1024,
      drainTimeoutMs: 10_000,
    });
    assert.deepEqual(
      problemsOf({
        HTTP_HEADERS_TIMEOUT_MS: '20000',
        HTTP_REQUEST_TIMEOUT_MS: '10000',
        HTTP_DRAIN_TIMEOUT_MS: '12000',
        HTTP_DRAIN_MB: '2000',
      }),
      [
        'HTTP_HEADERS_TIMEOUT_MS (20000) must not exceed HTTP_REQUEST_TIMEOUT_MS (10000)',
        'HTTP_DRAIN_TIMEOUT_MS (12000) must not exceed HTTP_REQUEST_TIMEOUT_MS (10000)',
        'HTTP_DRAIN_MB must be an integer from 0 to 1024 (got "2000")',
      ],
    );
    assert.equal(loadConfig({ HTTP_DRAIN_MB: '0' }).http.drainBytes, 0);
  });

  it('issue 20: password hashing (2 at once, 64 waiting, cost 2^15) and failed sign-in limits (5 / 20 / 100 a minute) default so, and are checked', () => {
    assert.deepEqual(loadConfig({}).authLimits, {
      hashConcurrency: 2,
      hashQueue: 64,
      hashCost: 15,
      failureWindowSeconds: 60,
      failuresPerIp: 20,
      failuresPerIpUser: 5,
      failuresPerUser: 100,
    });
    const problems = problemsOf({
      AUTH_HASH_CONCURRENCY: '0',
      AUTH_FAILURE_WINDOW_SECONDS: '0',
      AUTH_HASH_QUEUE: 'x',
      PASSWORD_HASH_COST: '9',
    });
    assert.equal(problems.length, 4);
    assert.equal(problemsOf({ PASSWORD_HASH_COST: '18' }).length, 1);
    assert.equal(loadConfig({ PASSWORD_HASH_COST: '12' }).authLimits.hashCost, 12);
    assert.match(problems.join('\n'), /AUTH_HASH_CONCURRENCY.*AUTH_HASH_QUEUE.*AUTH_FAILURE_WINDOW_SECONDS/s);
    assert.equal(loadConfig({ AUTH_FAILURES_PER_IP: '0' }).authLimits.failuresPerIp, 0);
  });

  it('PGLITE_WASM chooses the compilers of the embedded database (decision 122)', () => {
    assert.deepEqual(loadConfig({ PGLITE_WASM: 'optimizing' }).db, {
      kind: 'pglite',
      dir: path.join(path.resolve('./data'), 'pg'),
      wasm: 'optimizing',
    });
    assert.equal(problemsOf({ PGLITE_WASM: 'turbo' }).length, 1);
    // PostgreSQL has no WASM: the setting is not part of its config.
    assert.deepEqual(loadConfig({ DATABASE_URL: 'postgres://h/db', PGLITE_WASM: 'optimizing' }).db, {
      kind: 'postgres',
      url: 'postgres://h/db',
    });
  });

  it('issue 9: a lease shorter than two heartbeats is refused (one late beat would reap a live worker)', () => {
    assert.deepEqual(problemsOf({ JOB_HEARTBEAT_SECONDS: '5', JOB_LEASE_SECONDS: '9' }), [
      'JOB_LEASE_SECONDS (9) must be at least twice JOB_HEARTBEAT_SECONDS (5)',
    ]);
    assert.equal(loadConfig({ JOB_HEARTBEAT_SECONDS: '5', JOB_LEASE_SECONDS: '10' }).jobs.leaseSeconds, 10);
  });

  it('issue 28 finding 5: the default HOSTING_ROOT is outside DATA_DIR; one an earlier version filled inside it stays', () => {
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hostplane-config-'));
    try {
      const dataDir = path.join(tmp, 'data');
      assert.equal(defaultHostingRoot(dataDir, true), '/var/lib/hostplane/hosting');
      assert.equal(defaultHostingRoot(dataDir, false), `${dataDir}-hosting`);
      fs.mkdirSync(path.join(dataDir, 'hosting', 'installs'), { recursive: true });
      assert.equal(defaultHostingRoot(dataDir, true), path.join(dataDir, 'hosting'));
    } finally {
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  });

  it('issue 16: HOSTING_DRIVER=local with its defaults, and its settings checked', () => {
    assert.equal(loadConfig({}).driver.kind, 'simulated');
    assert.equal(loadConfig({}).driver.local, null);
    const local = loadConfig({ HOSTING_DRIVER: 'local', DATA_DIR: '/srv/hp' }).driver;
    assert.deepEqual(local.local, {
      // Issue 28: outside DATA_DIR (0700).
      hostingRoot: process.getuid?.() === 0 ? '/var/lib/hostplane/hosting' : path.resolve('/srv/hp-hosting'),
      mariadbUrl: 'mysql://root@127.0.0.1:3306',
      maxHeavyOperations: 2,
      web: null,
      ssh: null,
      acme: {
        directoryUrl: 'https://acme-v02.api.letsencrypt.org/directory',
        email: null,
        caBundleFile: null,
      },
    });
    assert.deepEqual(
      loadConfig({ HOSTING_DRIVER: 'local', LOCAL_WEB: 'on', HOSTING_HTTP_PORT: '8080' }).driver.local?.web,
      { httpPort: 8080, httpsPort: 443, phpRequestTimeoutSeconds: 300 },
    );
    assert.deepEqual(
      loadConfig({ HOSTING_DRIVER: 'local', LOCAL_WEB: 'on', HOSTING_HTTPS_PORT: '8443' }).driver.local?.web,
      { httpPort: 80, httpsPort: 8443, phpRequestTimeoutSeconds: 300 },
    );
    assert.deepEqual(problemsOf({ HOSTING_DRIVER: 'local', LOCAL_WEB: 'on', HOSTING_HTTPS_PORT: '0' }), [
      'HOSTING_HTTPS_PORT must be an integer from 1 to 65535 (got "0")',
    ]);
    assert.equal(loadConfig({ HOSTING_DRIVER: 'local', LOCAL_WEB: 'on' }).driver.local?.web?.httpPort, 80);
    assert.equal(
      loadConfig({ HOSTING_DRIVER: 'local', LOCAL_WEB: 'on', LOCAL_PHP_REQUEST_TIMEOUT_SECONDS: '20' }).driver
        .local?.web?.phpRequestTimeoutSeconds,
      20,
    );
    assert.deepEqual(
      problemsOf({ HOSTING_DRIVER: 'local', LOCAL_WEB: 'on', LOCAL_PHP_REQUEST_TIMEOUT_SECONDS: '0' }),
      ['LOCAL_PHP_REQUEST_TIMEOUT_SECONDS must be an integer from 1 to 86400 (got "0")'],
    );
    assert.deepEqual(
      problemsOf({ HOSTING_DRIVER: 'local', MARIADB_URL: 'postgres://x', LOCAL_MAX_HEAVY_OPERATIONS: '0' }),
      [
        'MARIADB_URL must use mysql: or mariadb: (got "postgres:")',
        'LOCAL_MAX_HEAVY_OPERATIONS must be an integer from 1 to 64 (got "0")',
      ],
    );
    assert.deepEqual(problemsOf({ HOSTING_DRIVER: 'remote' }), [
      'HOSTING_DRIVER must be one of simulated, local, fleet (got "remote")',
    ]);
  });

  it('issue 31: SSH_PORT turns on SFTP (local driver with LOCAL_WEB=on only), SSH_ADDRESS an IP, SSH_SHELLS on/off', () => {
    const web = { HOSTING_DRIVER: 'local', LOCAL_WEB: 'on' };
    assert.equal(loadConfig(web).driver.local?.ssh, null);
    assert.deepEqual(loadConfig({ ...web, SSH_PORT: '2222' }).driver.local?.ssh, {
      port: 2222,
      address: '0.0.0.0',
      shells: false,
    });
    assert.deepEqual(loadConfig({ ...web, SSH_PORT: '2222', SSH_ADDRESS: '::1' }).driver.local?.ssh, {
      port: 2222,
      address: '::1',
      shells: false,
    });
    assert.equal(loadConfig({ ...web, SSH_PORT: '2222', SSH_SHELLS: 'on' }).driver.local?.ssh?.shells, true);
    assert.deepEqual(problemsOf({ ...web, SSH_SHELLS: 'on' }), ['SSH_SHELLS=on needs SSH_PORT']);
    assert.deepEqual(problemsOf({ ...web, SSH_PORT: '70000', SSH_ADDRESS: 'example.com' }), [
      'SSH_PORT must be an integer from 1 to 65535 (got "70000")',
      'SSH_ADDRESS must be an IP address',
    ]);
    assert.deepEqual(problemsOf({ HOSTING_DRIVER: 'local', SSH_PORT: '2222' }), [
      'SSH_PORT needs LOCAL_WEB=on (SFTP serves the installs the web tier provisions)',
    ]);
    assert.deepEqual(problemsOf({ SSH_PORT: '2222' }), [
      'SSH_PORT needs HOSTING_DRIVER=local with LOCAL_WEB=on',
    ]);
  });

  it('issue 21: ACME_DIRECTORY_URL (https only), ACME_EMAIL and ACME_CA_BUNDLE (an absolute path) are checked', () => {
    const acme = loadConfig({
      HOSTING_DRIVER: 'local',
      ACME_DIRECTORY_URL: 'https://localhost:14000/dir',
      ACME_EMAIL: 'ops@example.test',
      ACME_CA_BUNDLE: '/etc/hostplane/acme-ca.pem',
    }).driver.local?.acme;
    assert.deepEqual(acme, {
      directoryUrl: 'https://localhost:14000/dir',
      email: 'ops@example.test',
      caBundleFile: '/etc/hostplane/acme-ca.pem',
    });
    assert.deepEqual(
      problemsOf({
        HOSTING_DRIVER: 'local',
        ACME_DIRECTORY_URL: 'http://localhost:14000/dir',
        ACME_EMAIL: 'not an address',
        ACME_CA_BUNDLE: 'relative/ca.pem',
      }),
      [
        'ACME_EMAIL is not an e-mail address (got "not an address")',
        'ACME_CA_BUNDLE must be an absolute path',
        'ACME_DIRECTORY_URL must use https: (got "http:")',
      ],
    );
  });

  it('issue 15: METRICS_TOKEN, METRICS_PORT and the rotation keys are optional and checked', () => {
    const defaults = loadConfig({});
    assert.equal(defaults.metricsToken, null);
    assert.equal(defaults.metricsPort, null);
    assert.equal(defaults.adminTokenPrevious, null);
    assert.equal(defaults.secretKeyOld, null);
    const set = loadConfig({
      METRICS_TOKEN: 'metrics-token-0123456789',
      METRICS_PORT: '9464',
      HOSTPLANE_ADMIN_TOKEN_PREVIOUS: 'previous-admin-token-0123',
      HOSTPLANE_SECRET_KEY_OLD: 'old-secret-key-0123456789abcdefghijklmn',
    });
    assert.equal(set.metricsToken, 'metrics-token-0123456789');
    assert.equal(set.metricsPort, 9464);
    assert.equal(set.adminTokenPrevious, 'previous-admin-token-0123');
    assert.equal(set.secretKeyOld, 'old-secret-key-0123456789abcdefghijklmn');
    const problems = problemsOf({
      METRICS_TOKEN: 'short',
      METRICS_PORT: '70000',
      HOSTPLANE_ADMIN_TOKEN_PREVIOUS: 'short',
      HOSTPLANE_SECRET_KEY_OLD: 'short',
    });
    for (const name of [
      'METRICS_TOKEN',
      'METRICS_PORT',
      'HOSTPLANE_ADMIN_TOKEN_PREVIOUS',
      'HOSTPLANE_SECRET_KEY_OLD',
    ]) {
      assert.ok(
        problems.some((p) => p.startsWith(name)),
        `${name}: ${problems.join('; ')}`,
      );
    }
  });

  it('TRUST_PROXY: unset trusts no proxy; addresses, CIDR ranges, keywords or 1 to 10 hops; never "all"', () => {
    assert.equal(loadConfig({}).trustProxy, null);
    assert.deepEqual(loadConfig({ TRUST_PROXY: '10.0.0.0/8, ::1, fd00::/8,loopback' }).trustProxy, [
      '10.0.0.0/8',
      '::1',
      'fd00::/8',
      'loopback',
    ]);
    assert.equal(loadConfig({ TRUST_PROXY: '2' }).trustProxy, 2);
    for (const bad of [
      'true',
      'all',
      '0',
      '11',
      '10.0.0.0/33',
      '10.0.0.1/8/1',
      'proxy.example',
      '::1/129',
      '1.2.3',
    ]) {
      const problems = problemsOf({ TRUST_PROXY: bad });
      assert.ok(
        problems.some((p) => p.startsWith('TRUST_PROXY')),
        `${bad}: ${problems.join('; ')}`,
      );
    }
  });

  it('issue 29 defect 3: WEBHOOK_ALLOWED_NETWORKS takes CIDRs and addresses; the retired WEBHOOK_ALLOW_PRIVATE_TARGETS is a problem naming it', () => {
    const config = loadConfig({ WEBHOOK_ALLOWED_NETWORKS: ' 10.0.0.0/8, fd00::/8 ,169.254.169.254' });
    assert.deepEqual(config.webhooks.allowedNetworks, ['10.0.0.0/8', 'fd00::/8', '169.254.169.254']);
    assert.deepEqual(loadConfig({}).webhooks.allowedNetworks, []);
    const bad = problemsOf({ WEBHOOK_ALLOWED_NETWORKS: '10.0.0.0/33,example.com,fe80::1%eth0' });
    assert.match(bad.join('\n'), /WEBHOOK_ALLOWED_NETWORKS entries must be IP addresses or CIDR ranges/);
    for (const value of ['true', 'false']) {
      const retired = problemsOf({ WEBHOOK_ALLOW_PRIVATE_TARGETS: value });
      assert.match(retired.join('\n'), /WEBHOOK_ALLOW_PRIVATE_TARGETS is retired.*WEBHOOK_ALLOWED_NETWORKS/);
    }
  });

  it('issue 30: HOSTING_DRIVER=fleet, the FLEET_* defaults, and the agent settings checked', () => {
    const config = loadConfig({ HOSTING_DRIVER: 'fleet', DATA_DIR: '/srv/agent' });
    assert.equal(config.driver.kind, 'fleet');
    assert.equal(config.fleet.silentSeconds, 35);
    assert.equal(config.fleet.silentFailSeconds, 900);
    assert.equal(config.fleet.agent.credentialFile, '/srv/agent/agent-credential');
    assert.equal(config.fleet.agent.controlPlaneUrl, null);
    const problems = (() => {
      try {
        loadConfig({
          FLEET_SILENT_SECONDS: '1',
          AGENT_CONTROL_PLANE_URL: 'ftp://x',
          AGENT_ENROLMENT_TOKEN: 'x',
        });
        return [];
      } catch (err) {
        return (err as ConfigError).problems;
      }
    })();
    assert.equal(problems.length, 3, problems.join('; '));
    // Decision #170: the agent's test fault only in test mode, and only a method name.
    assert.equal(config.fleet.agent.killBeforeReport, null);
    assert.equal(
      loadConfig({ HOSTPLANE_FAULTS: 'on', AGENT_FAULT_KILL_BEFORE_REPORT: 'backup' }).fleet.agent
        .killBeforeReport,
      'backup',
    );
    for (const env of [
      { AGENT_FAULT_KILL_BEFORE_REPORT: 'backup' },
      { HOSTPLANE_FAULTS: 'on', AGENT_FAULT_KILL_BEFORE_REPORT: 'rm -rf' },
    ])
      assert.throws(() => loadConfig(env), /AGENT_FAULT_KILL_BEFORE_REPORT/);
  });
});
