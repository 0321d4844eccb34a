/**
 * The layer rules of Hostplane, checked by `npm run lint` (so by CI). docs/architecture.md explains
 * the layers. Every rule is written by path PATTERN, so a new module under src/modules/<name>/ (or a
 * new file of a layer) is covered without editing this file. An allowed exception is a `pathNot` with
 * its reason beside it; there is no other way to be let off.
 *
 * Type-only imports count (tsPreCompilationDeps): a type-only cycle is still a cycle, and a type is
 * still knowledge of another layer.
 *
 * @type {import('dependency-cruiser').IConfiguration}
 */
module.exports = {
  forbidden: [
    {
      name: 'no-cycle',
      severity: 'error',
      comment:
        'No import cycle at all, type-only imports included. Break it the way services.ts does: the ' +
        'composition root builds in dependency order, and a shared type moves to the lower layer.',
      from: { path: '^(src|test|bench|scripts)/' },
      to: { circular: true },
    },
    {
      name: 'http-not-to-modules',
      severity: 'error',
      comment:
        'src/http/ is the shared HTTP layer (auth hooks, error renderer, pagination, Location, ETag): ' +
        'modules build on it, never the other way round. It knows no module and not the services.',
      from: { path: '^src/http/' },
      to: {
        path: ['^src/modules/', '^src/services\\.ts$', '^src/routes\\.ts$', '^src/app\\.ts$', '^src/main\\.ts$'],
      },
    },
    {
      name: 'db-only-config',
      severity: 'error',
      comment:
        'src/db/ (schema, client, migrations, transactions, page) is the bottom layer: it imports ' +
        'nothing of ours but src/config.ts.',
      from: { path: '^src/db/' },
      to: { path: '^src/', pathNot: ['^src/db/', '^src/config\\.ts$'] },
    },
    {
      name: 'routes-not-to-db',
      severity: 'error',
      comment:
        'Thin routes: a *.routes.ts file parses, calls one service and renders; SQL, rows and ' +
        'transactions live behind the service (a shared type such as Page comes re-exported).',
      from: { path: '\\.routes\\.ts$' },
      to: { path: '^src/db/' },
    },
    {
      name: 'no-foreign-repo',
      severity: 'error',
      comment:
        "A module never imports another module's repository (not even a row type): it goes through " +
        "that module's service, or a type the service re-exports.",
      from: { path: '^src/modules/([^/]+)/' },
      to: { path: '^src/modules/[^/]+/[^/]+\\.repo\\.ts$', pathNot: '^src/modules/$1/' },
    },
    {
      name: 'operations-below-installs',
      severity: 'error',
      comment:
        'Installs start operations (provisioning, copies), so operations sit below installs: ' +
        'modules/operations names what it reads of an install (InstallLookup, InstallRef) and never ' +
        'imports modules/installs, not even a type (no module-level cycle).',
      from: { path: '^src/modules/operations/' },
      to: { path: '^src/modules/installs/' },
    },
    {
      name: 'repo-only-from-its-folder',
      severity: 'error',
      comment:
        'Every *.repo.ts (a module\'s, the outbox\'s, the leases\', a driver\'s, auth\'s) is imported only ' +
        'by the files of its own folder: everything else (the composition root, app, routes, other ' +
        'layers, tests, bench) goes through the service beside it, or a type that service re-exports.',
      from: {
        path: '^(.+)/[^/]+$',
        pathNot: [
          // EXCEPTION: the usage benchmark runs EXPLAIN (ANALYZE, BUFFERS) on the very statements the
          // insights and summary routes run (bench/README.md "Usage at scale"), so it imports their
          // query builders rather than copying the SQL.
          '^bench/usage\\.bench\\.ts$',
        ],
      },
      to: { path: '\\.repo\\.ts$', pathNot: '^$1/[^/]+\\.repo\\.ts$' },
    },
    {
      name: 'routes-not-to-repo',
      severity: 'error',
      comment:
        'Thin routes: a *.routes.ts file calls its service; no repository, not even its own module\'s ' +
        '(a row type comes re-exported by the service).',
      from: { path: '\\.routes\\.ts$' },
      to: { path: '\\.repo\\.ts$' },
    },
    {
      name: 'drivers-db-only-through-their-repo',
      severity: 'error',
      comment:
        'decisions.md #27: a hosting driver keeps its own state, reached only through its own repo ' +
        'files (drivers/<driver>/*.repo.ts). The driver interface knows no database.',
      from: { path: '^src/drivers/', pathNot: '^src/drivers/.+\\.repo\\.ts$' },
      to: {
        path: '^src/db/',
        pathNot: [
          // EXCEPTION: a driver is given the database handle (the `Db` type) and groups its repo
          // calls in one transaction (a keyed task applies its effect once, decisions.md #27). Tables
          // (db/schema.ts) and SQL stay in its repo file.
          '^src/db/client\\.ts$',
          '^src/db/transaction\\.ts$',
        ],
      },
    },
    {
      name: 'no-foreign-driver-repo',
      severity: 'error',
      comment:
        "A driver never imports another driver's repository: each keeps its own state (decisions.md " +
        '#27). What one driver lends another (the local driver issues certificates with the simulated ' +
        "driver's CA) is handed over by the composition root.",
      from: { path: '^src/drivers/([^/]+)/' },
      to: { path: '^src/drivers/[^/]+/[^/]+\\.repo\\.ts$', pathNot: '^src/drivers/$1/' },
    },
    {
      name: 'drivers-not-to-modules',
      severity: 'error',
      comment: 'Drivers are the outer edge: they know the platform, not our modules or services.',
      from: { path: '^src/drivers/' },
      to: { path: ['^src/modules/', '^src/services\\.ts$', '^src/http/'] },
    },
    {
      name: 'jobs-not-to-modules',
      severity: 'error',
      comment:
        'src/jobs/ is the engine (catalog of specs and types, queue, worker, due work): it runs the ' +
        'handlers the composition root gives it and imports no module and not the services.',
      from: { path: '^src/jobs/' },
      to: { path: ['^src/modules/', '^src/services\\.ts$', '^src/http/'] },
    },
    {
      name: 'only-the-roots-import-the-root',
      severity: 'error',
      comment:
        'app.ts and main.ts are composition roots: only cli.ts (and the test harness, bench) start ' +
        'them. A module that needs something of theirs takes it as a dependency.',
      from: { path: '^src/', pathNot: ['^src/cli\\.ts$', '^src/main\\.ts$'] },
      to: { path: ['^src/main\\.ts$', '^src/app\\.ts$'] },
    },
    {
      name: 'only-the-app-imports-the-route-table',
      severity: 'error',
      comment:
        'src/routes.ts is the table of every routes plugin; app.ts registers it. Nothing else mounts ' +
        'routes (a module exports its plugin and the table names it).',
      from: { path: '^(src|test|bench|scripts)/', pathNot: ['^src/app\\.ts$'] },
      to: { path: '^src/routes\\.ts$' },
    },
    {
      name: 'src-not-to-test',
      severity: 'error',
      comment: 'Production code never imports test support.',
      // EXCEPTION: unit tests that live beside their code (src/**/*.test.ts) may use test support
      // (fixtures, e.g. test/support/ssh-keys.ts); they are not production code and not built.
      from: { path: '^src/', pathNot: '\\.test\\.ts$' },
      to: { path: '^(test|bench)/' },
    },
    {
      name: 'not-to-unresolvable',
      severity: 'error',
      comment: 'An import that resolves to nothing on disk.',
      from: {},
      to: { couldNotResolve: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: ['^dist/', '^node_modules/', '^drizzle/'] },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
      extensions: ['.ts', '.js', '.d.ts', '.json'],
    },
    reporterOptions: { text: { highlightFocused: true } },
  },
};
