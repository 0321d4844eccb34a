import fs from 'node:fs';
import { Compile } from 'typebox/compile';
import { systemClock } from './clock.js';
import { type Config, ConfigError, loadConfig } from './config.js';
import { openDatabase } from './db/client.js';
import { migrateDatabase } from './db/migrate.js';
import { PGLITE_TEMPLATE_DIR, writeTemplate } from './db/template.js';
import { doctorChecks, doctorReport, failing, systemProbe } from './drivers/local/doctor.js';
import { endSpawner } from './drivers/local/spawner.js';
import { AgentStopped, agentInstalls, runAgent } from './fleet/agent.js';
import { createJobQueue } from './jobs/queue.js';
import { openConfiguredDatabase, start } from './main.js';
import { SeedFixture } from './modules/admin/admin.schemas.js';
import { resealSecrets } from './reseal.js';
import { loadOrCreateSecret } from './secrets.js';
import { configuredDriver, createServices } from './services.js';

const USAGE = `usage: hostplane <command>
  serve           run the API and the job worker in one process (default)
  api             run the API only (PostgreSQL; run workers beside it)
  worker          run the job worker only (PostgreSQL)
  agent           run a hosting server's agent (issue 30): enrols with AGENT_ENROLMENT_TOKEN once,
                  then runs this server's calls from AGENT_CONTROL_PLANE_URL with HOSTING_DRIVER
  migrate         apply database migrations and exit
  doctor          check the system tools the configured hosting driver needs (exit 1 naming the
                  Debian packages that are missing)
  seed FILE.json  load accounts, users, sites, installs and credentials from a fixture
  reseal          re-seal stored secrets from HOSTPLANE_SECRET_KEY_OLD to HOSTPLANE_SECRET_KEY
  build-template  (npm run build) the migrated embedded database a fresh DATA_DIR is copied from`;

/** Key rotation (docs/operations.md): one transaction, safe to rerun. */
async function reseal() {
  const config = loadConfig();
  if (!config.secretKeyOld)
    throw new Error('reseal needs HOSTPLANE_SECRET_KEY_OLD (the key to re-seal from)');
  if (!config.secretKey) throw new Error('reseal needs HOSTPLANE_SECRET_KEY (the key to re-seal to)');
  const database = await openConfiguredDatabase(config);
  try {
    const counts = await resealSecrets(database, config.secretKeyOld, config.secretKey);
    console.log(`resealed ${counts.resealed} sealed values; ${counts.current} already under the new key`);
  } finally {
    await database.close();
  }
}

async function seed(file: string | undefined) {
  if (!file) throw new Error('seed needs a FILE.json argument');
  const fixture: unknown = JSON.parse(fs.readFileSync(file, 'utf8'));
  const check = Compile(SeedFixture);
  if (!check.Check(fixture)) {
    const problems = [...check.Errors(fixture)]
      .slice(0, 20)
      .map((e) => `  ${e.instancePath || '/'} ${e.message}`);
    throw new Error(`${file} is not a valid fixture:\n${problems.join('\n')}`);
  }
  const config = loadConfig();
  const database = await openConfiguredDatabase(config);
  const queue = createJobQueue({ database, jobs: config.jobs });
  try {
    await queue.start();
    const secretKey = loadOrCreateSecret(config.secretKey, config.dataDir, 'secret-key').value;
    const services = createServices({ config, database, clock: systemClock, secretKey, queue });
    const counts = await services.admin.seed(fixture);
    console.log(`seeded ${JSON.stringify(counts)}`);
  } finally {
    await queue.stop();
    await database.close();
  }
}

/**
 * Issue 14: the schema and pg-boss's schema and queues in a PGlite data dir, once at build time, so
 * a fresh DATA_DIR is a copy (db/template.ts). The queues get the catalog's defaults; every start
 * re-applies its own JOB_* settings to them.
 */
async function buildTemplate() {
  const work = `${PGLITE_TEMPLATE_DIR}.work-${process.pid}`;
  fs.rmSync(work, { recursive: true, force: true });
  try {
    const database = await openDatabase({ kind: 'pglite', dir: `${work}/data` });
    try {
      await migrateDatabase(database);
      const queue = createJobQueue({ database, jobs: loadConfig({}).jobs });
      await queue.start();
      await queue.stop();
    } finally {
      await database.close();
    }
    writeTemplate(`${work}/data`, PGLITE_TEMPLATE_DIR);
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
}

/**
 * Issue 21: the configured driver's system tools, checked (drivers/local/doctor.ts). `doctor` prints
 * the table; `serve`/`api`/`worker` refuse to start with the same table before opening anything.
 */
async function doctor(config: Config, refuse: boolean) {
  // Issue 28: the modes only when asked (`doctor`): a start sets them itself.
  const checks = await doctorChecks(config.driver, systemProbe, { dataDir: config.dataDir, modes: !refuse });
  const report = doctorReport(config.driver, checks);
  const ok = !checks.some(failing);
  if (refuse) {
    if (!ok)
      throw new Error(`the hosting driver's system tools are not ready (hostplane doctor):\n${report}`);
    return;
  }
  console.log(report);
  if (!ok) process.exitCode = 1;
}

/**
 * Issue 30: `hostplane agent`. Its DATA_DIR holds this server's own state (the driver's task records,
 * in an embedded database of its own): no database of the control plane is ever opened here.
 */
async function agent() {
  const config = loadConfig();
  const { controlPlaneUrl, enrolmentToken, credentialFile, heartbeatSeconds, reconcileSeconds } =
    config.fleet.agent;
  if (!controlPlaneUrl) throw new Error('agent needs AGENT_CONTROL_PLANE_URL');
  if (config.driver.kind === 'fleet')
    throw new Error('agent runs HOSTING_DRIVER=local (or simulated), not fleet');
  if (config.db.kind !== 'pglite') throw new Error('agent keeps its state in DATA_DIR: unset DATABASE_URL');
  await doctor(config, true);
  const database = await openConfiguredDatabase(config);
  const secretKey = loadOrCreateSecret(config.secretKey, config.dataDir, 'secret-key').value;
  // Issue 31 (decision 200): with SSH_PORT, this server's sshd asks the control plane through the agent.
  const { driver, sshd } = configuredDriver({ config, db: database.db, clock: systemClock, secretKey });
  const stop = new AbortController();
  for (const signal of ['SIGTERM', 'SIGINT'] as const) process.once(signal, () => stop.abort());
  try {
    await driver.start?.();
    await runAgent({
      controlPlaneUrl,
      credentialFile,
      enrolmentToken,
      heartbeatSeconds,
      reconcileSeconds,
      driver,
      version: AGENT_VERSION,
      dataDir: config.dataDir,
      log: (message) => console.log(`hostplane agent: ${message}`),
      signal: stop.signal,
      ...(config.fleet.agent.killBeforeReport && {
        beforeReport: (method: string, status: string) => {
          if (method !== config.fleet.agent.killBeforeReport || status !== 'done') return;
          console.log(`hostplane agent: fault: killed after doing ${method}, before reporting it`);
          process.kill(process.pid, 'SIGKILL');
        },
      }),
      installs: agentInstalls(database.db),
      sshd,
    });
  } finally {
    await driver.close?.();
    await database.close();
  }
}

/** The version an agent reports (package.json's, bundled at build). */
const AGENT_VERSION = '0.1.0';

async function main(argv: string[]) {
  const [command = 'serve', ...args] = argv;
  switch (command) {
    case 'serve':
    case 'api':
    case 'worker': {
      const config = loadConfig();
      await doctor(config, true);
      await start(config, command);
      return;
    }
    case 'doctor':
      await doctor(loadConfig(), false);
      return;
    case 'agent':
      await agent();
      return;
    case 'migrate': {
      // The schema, then pg-boss's own schema and queues: processes started together afterwards find
      // them made (several processes creating pg-boss's queues at once can deadlock).
      const config = loadConfig();
      const database = await openConfiguredDatabase(config);
      const queue = createJobQueue({ database, jobs: config.jobs });
      try {
        await queue.start();
        await queue.stop();
      } finally {
        await database.close();
      }
      console.log('migrations applied');
      return;
    }
    case 'seed':
      await seed(args[0]);
      return;
    case 'reseal':
      await reseal();
      return;
    case 'build-template':
      await buildTemplate();
      return;
    default:
      console.error(USAGE);
      process.exitCode = 2;
  }
}

main(process.argv.slice(2))
  .then(() => endSpawner())
  .catch((err: unknown) => {
    console.error(
      err instanceof ConfigError || err instanceof AgentStopped
        ? err.message
        : `hostplane: ${(err as Error).message}`,
    );
    process.exit(1);
  });
