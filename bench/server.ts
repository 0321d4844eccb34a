/**
 * One server under test, in its own process so that it does not share an event loop with the load
 * generator:
 *
 *   node --import tsx bench/server.ts hello|raw|app [account_id]
 *   node --import tsx bench/server.ts bytes FILE   (FILE: {"/path": "body", ...}, served from memory)
 *
 * The database comes from the usual configuration (DATABASE_URL, else PGlite in DATA_DIR). The
 * server listens on HOST:PORT (the bench passes 127.0.0.1:0) and prints one JSON line
 * `{"port": N, "path": "/..."}` on stdout once it accepts requests. SIGTERM closes it.
 */
import fs from 'node:fs';
import { monitorEventLoopDelay, PerformanceObserver, performance } from 'node:perf_hooks';
import Fastify from 'fastify';
import { loadConfig } from '../src/config.js';
import type { Database } from '../src/db/client.js';
import { openConfiguredDatabase, serve } from '../src/main.js';

type Row = Record<string, unknown>;
type Query = (text: string, params: unknown[]) => Promise<Row[]>;

// The same page as GET /v1/sites?limit=100 for an owner, in hand-written SQL and the same single
// statement as sites.repo.ts listSitesWithInstalls: the page of sites, the total as a scalar
// subquery and each site's installs as a json_agg. No auth, no schema, no ORM.
const SITES_SQL = `select s.id, s.account_id, s.name, s.group_name, s.tags, s.sandbox, s.transferable, s.created_at,
  (select count(*) from sites where account_id = $1) as total,
  coalesce((select json_agg(json_build_object('id', i.id, 'name', i.name, 'environment', i.environment,
      'php_version', i.php_version, 'is_multisite', i.is_multisite) order by i.created_at, i.id)
    from installs i where i.site_id = s.id and i.account_id = $1), '[]'::json) as installs
  from sites s where s.account_id = $1 order by s.created_at, s.id limit 100`;

function queryOf(database: Database): Query {
  if (database.pool) {
    const pool = database.pool;
    return async (text, params) => (await pool.query<Row>(text, params)).rows;
  }
  if (database.pglite) {
    const pglite = database.pglite;
    return async (text, params) => (await pglite.query<Row>(text, params)).rows;
  }
  throw new Error('database has neither a pg pool nor a PGlite handle');
}

/** The raw-SQL baseline's handler body: one statement and the same JSON shape as the API's Site. */
async function rawSites(query: Query, accountId: string, installDomain: string) {
  const sites = await query(SITES_SQL, [accountId]);
  return {
    previous: null,
    next: null,
    count: Number(sites[0]?.total ?? 0),
    results: sites.map((s) => ({
      id: s.id,
      name: s.name,
      account: { id: s.account_id },
      group_name: s.group_name,
      tags: s.tags,
      created_at: (s.created_at as Date).toISOString(),
      sandbox: s.sandbox,
      transferable: s.transferable,
      installs: (s.installs as Row[]).map((i) => ({
        id: i.id,
        name: i.name,
        environment: i.environment,
        cname: `${i.name}.${installDomain}`,
        php_version: i.php_version,
        is_multisite: i.is_multisite,
      })),
    })),
  };
}

async function bare(kind: 'hello' | 'raw', accountId: string | undefined) {
  const config = loadConfig();
  const database = kind === 'raw' ? await openConfiguredDatabase(config) : null;
  const app = Fastify({ logger: false });
  if (database) {
    if (!accountId) throw new Error('raw needs the account id as its second argument');
    const query = queryOf(database);
    app.get('/raw/sites', async () => rawSites(query, accountId, config.installDomain));
  } else {
    app.get('/hello', async () => ({ hello: 'world' }));
  }
  await app.listen({ port: config.port, host: config.host });
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  process.once('SIGTERM', () => {
    app
      .close()
      .then(() => database?.close())
      .then(
        () => process.exit(0),
        () => process.exit(1),
      );
  });
  return { port, path: database ? '/raw/sites' : '/hello' };
}

/** Bare Fastify serving given bodies from memory (the same bytes as our routes: bench/peers.bench.ts). */
async function bytes(file: string | undefined) {
  if (!file) throw new Error('bytes needs a JSON file of {path: body}');
  const bodies = JSON.parse(fs.readFileSync(file, 'utf8')) as Record<string, string>;
  const config = loadConfig();
  const app = Fastify({ logger: false });
  for (const [url, body] of Object.entries(bodies)) {
    app.get(url.split('?')[0] ?? url, async (_request, reply) =>
      reply.type('application/json; charset=utf-8').send(body),
    );
  }
  await app.listen({ port: config.port, host: config.host });
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  process.once('SIGTERM', () => {
    app.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  });
  return { port, path: '' };
}

/**
 * BENCH_MONITOR=file (bench/reads.bench.ts --long): one JSON line a second of what could make a
 * server slow down under a steady load: event-loop delay and utilisation, CPU, heap and RSS, GC
 * pauses by kind, the database pools (from /metrics) and the read cache.
 */
function monitor(
  file: string,
  app: { inject: (o: { url: string }) => Promise<{ body: string }>; server: import('node:http').Server },
) {
  let requests = 0;
  app.server.on('request', () => {
    requests++;
  });
  const delay = monitorEventLoopDelay({ resolution: 10 });
  delay.enable();
  const gc = { count: 0, ms: 0, majorMs: 0, maxMs: 0 };
  new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      gc.count++;
      gc.ms += entry.duration;
      gc.maxMs = Math.max(gc.maxMs, entry.duration);
      // kind 4: mark-compact (NODE_PERFORMANCE_GC_MAJOR).
      if ((entry as unknown as { detail?: { kind?: number } }).detail?.kind === 4)
        gc.majorMs += entry.duration;
    }
  }).observe({ entryTypes: ['gc'] });
  let elu = performance.eventLoopUtilization();
  let cpu = process.cpuUsage();
  const start = Date.now();
  const out = fs.openSync(file, 'a');
  const timer = setInterval(async () => {
    const nowElu = performance.eventLoopUtilization(elu);
    elu = performance.eventLoopUtilization();
    const nowCpu = process.cpuUsage(cpu);
    cpu = process.cpuUsage();
    const metrics = (await app.inject({ url: '/metrics' })).body;
    const pools = metrics
      .split('\n')
      .filter((l) => l.startsWith('hostplane_db_pool_'))
      .map((l) => l.replace('hostplane_db_pool_', ''));
    const memory = process.memoryUsage();
    const cache = (app as { readCache?: { stats(): unknown } | null }).readCache?.stats() ?? null;
    const line = {
      t: Math.round((Date.now() - start) / 1000),
      at: new Date().toISOString(),
      requests,
      cpuUsPerRequest: requests ? Math.round((nowCpu.user + nowCpu.system) / requests) : null,
      elu: Number(nowElu.utilization.toFixed(3)),
      cpuMs: Math.round((nowCpu.user + nowCpu.system) / 1000),
      delayP50Ms: Number((delay.percentile(50) / 1e6).toFixed(2)),
      delayP99Ms: Number((delay.percentile(99) / 1e6).toFixed(2)),
      delayMaxMs: Number((delay.max / 1e6).toFixed(2)),
      heapMb: Math.round(memory.heapUsed / 1e6),
      rssMb: Math.round(memory.rss / 1e6),
      gc: { ...gc, ms: Math.round(gc.ms), majorMs: Math.round(gc.majorMs), maxMs: Math.round(gc.maxMs) },
      pools,
      cache,
    };
    delay.reset();
    requests = 0;
    Object.assign(gc, { count: 0, ms: 0, majorMs: 0, maxMs: 0 });
    fs.writeSync(out, `${JSON.stringify(line)}\n`);
  }, 1000);
  timer.unref();
}

async function main() {
  const [kind, accountId] = process.argv.slice(2);
  let ready: { port: number; path: string };
  if (kind === 'bytes') ready = await bytes(accountId);
  else if (kind === 'hello' || kind === 'raw') ready = await bare(kind, accountId);
  else if (kind === 'app') {
    // The production composition root (config → database → migrate → buildApp → listen, SIGTERM).
    const { port, app } = await serve(loadConfig(), () => {});
    if (port === null || !app) throw new Error('serve() started no HTTP server');
    if (process.env.BENCH_MONITOR) monitor(process.env.BENCH_MONITOR, app);
    ready = { port, path: '/v1/sites?limit=100' };
  } else throw new Error(`unknown server kind "${kind}" (hello, raw or app)`);
  process.stdout.write(`${JSON.stringify(ready)}\n`);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
