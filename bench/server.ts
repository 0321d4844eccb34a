/**
 * One server under test, in its own process so that it does not share an event loop with the load
 * generator:
 *
 *   node --import tsx bench/server.ts hello|raw|app [account_id]
 *
 * The database comes from the usual configuration (DATABASE_URL, else PGlite in DATA_DIR). The
 * server listens on HOST:PORT (the bench passes 127.0.0.1:0) and prints one JSON line
 * `{"port": N, "path": "/..."}` on stdout once it accepts requests. SIGTERM closes it.
 */
import Fastify from 'fastify';
import { loadConfig } from '../src/config.js';
import type { Database } from '../src/db/client.js';
import { openConfiguredDatabase, serve } from '../src/main.js';

type Row = Record<string, unknown>;
type Query = (text: string, params: unknown[]) => Promise<Row[]>;

// The same page as GET /v1/sites?limit=100 for an owner, in hand-written SQL and the same two round
// trips as sites.repo.ts: the page of sites with the total as a scalar subquery, then the installs of
// those sites. No auth, no schema, no ORM.
const SITES_SQL = `select id, account_id, name, group_name, tags, sandbox, transferable, created_at,
  (select count(*) from sites where account_id = $1) as total
  from sites where account_id = $1 order by created_at, id limit 100`;
const INSTALLS_SQL = `select id, site_id, name, environment, php_version, is_multisite
  from installs where site_id = any($1::uuid[]) and account_id = $2 order by created_at, id`;

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

/** The raw-SQL baseline's handler body: two queries and the same JSON shape as the API's Site. */
async function rawSites(query: Query, accountId: string, installDomain: string) {
  const sites = await query(SITES_SQL, [accountId]);
  const installs = await query(INSTALLS_SQL, [sites.map((s) => s.id), accountId]);
  const bySite = new Map<unknown, Row[]>();
  for (const i of installs) bySite.set(i.site_id, [...(bySite.get(i.site_id) ?? []), i]);
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
      installs: (bySite.get(s.id) ?? []).map((i) => ({
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

async function main() {
  const [kind, accountId] = process.argv.slice(2);
  let ready: { port: number; path: string };
  if (kind === 'hello' || kind === 'raw') ready = await bare(kind, accountId);
  else if (kind === 'app') {
    // The production composition root (config → database → migrate → buildApp → listen, SIGTERM).
    const { port } = await serve(loadConfig(), () => {});
    ready = { port, path: '/v1/sites?limit=100' };
  } else throw new Error(`unknown server kind "${kind}" (hello, raw or app)`);
  process.stdout.write(`${JSON.stringify(ready)}\n`);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
