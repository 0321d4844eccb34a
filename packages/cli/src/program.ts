import fs from 'node:fs';
import { createHostplaneClient, type HostplaneClient, type Operation } from '@hostplane/client';
import { Command, Option } from 'commander';
import { completionScript } from './completion.js';
import { type Env, profilesFile, readProfiles, resolveProfile, saveProfile } from './credentials.js';
import { CliError, EXIT, EXIT_CODES_HELP } from './exit-codes.js';
import { createResolver, type Resolver } from './names.js';
import { type Io, Printer, table } from './output.js';
import { progressReporter } from './progress.js';

export interface Context {
  env: Env;
  io: Io;
  /** Reads stdin to its end (a password for `profile set`). */
  readStdin: () => Promise<string>;
}

interface GlobalOptions {
  json?: boolean;
  profile?: string;
}

const BIN = 'hostplane-cli';

/** A subcommand with its description and an example in its --help. */
function command(parent: Command, spec: string, description: string, example: string): Command {
  return (
    parent
      .command(spec)
      .description(description)
      // Commander ends each help text with a newline: more examples follow on the next lines.
      .addHelpText('after', `\nExample:\n  $ ${BIN} ${example}`)
  );
}

/** A group of subcommands (`sites`, `installs`, ...) with an example. */
function group(program: Command, name: string, description: string, example: string): Command {
  return command(program, name, description, example);
}

const listOptions = (cmd: Command) =>
  cmd
    .option('--limit <n>', 'records per page (0-100)', toInt, 100)
    .option('--offset <n>', 'first record', toInt, 0);

function toInt(value: string): number {
  if (!/^\d+$/.test(value)) throw new CliError(`Not a whole number: ${value}`, EXIT.usage);
  return Number(value);
}

const collect = (value: string, previous: string[] = []) => [...previous, value];

export function buildProgram(ctx: Context): Command {
  const program = new Command(BIN)
    .description(
      "The command line of Hostplane's API: sites, installs, domains, certificates, backups, users, transfers.",
    )
    .option('--json', "print JSON (the API's own records) instead of tables")
    .option(
      '-p, --profile <name>',
      'use this profile of the profile file (default: HOSTPLANE_PROFILE, else "default")',
    )
    .showHelpAfterError()
    .configureOutput({
      writeOut: (s) => ctx.io.stdout.write(s),
      writeErr: (s) => ctx.io.stderr.write(s),
    })
    .exitOverride()
    .addHelpText(
      'after',
      `
Credentials: HOSTPLANE_URL, HOSTPLANE_USERNAME and HOSTPLANE_PASSWORD, or a named profile in
${profilesFile(ctx.env)} (HOSTPLANE_PROFILES_FILE overrides; it must have mode 0600).

Example:
  $ export HOSTPLANE_URL=https://hosting.example.com HOSTPLANE_USERNAME=hp_... HOSTPLANE_PASSWORD=...
  $ ${BIN} sites list
  $ ${BIN} backup myblog --wait
  $ ${BIN} restore myblog <backup-id> --dry-run

Installs, sites and accounts are given by name or by id (a name several sites or accounts carry is
refused with the candidates' ids).

${EXIT_CODES_HELP}
`,
    );

  const globals = (cmd: Command) => cmd.optsWithGlobals<GlobalOptions>();
  const printer = (cmd: Command) => new Printer(ctx.io, Boolean(globals(cmd).json));
  const client = (cmd: Command): HostplaneClient => {
    const profile = resolveProfile(ctx.env, globals(cmd).profile);
    return createHostplaneClient({
      baseUrl: profile.url,
      username: profile.username,
      password: profile.password,
    });
  };

  /** Issue 29: names where people use names (names.ts); one resolver per command, its lists read once. */
  const resolvers = new WeakMap<Command, Resolver>();
  const resolve = (cmd: Command): Resolver => {
    let resolver = resolvers.get(cmd);
    if (!resolver) {
      resolver = createResolver(client(cmd));
      resolvers.set(cmd, resolver);
    }
    return resolver;
  };

  /**
   * Issue 29 (defect 7): provisioning's WordPress administrator password is in the operation the one
   * time it is read (decision 116): printed then, with the warning that it will not be shown again.
   * Without it (already read, or not an owner), how to sign in without a password.
   */
  const showAdmin = (out: Printer, operation: Operation | null, install: string) => {
    const admin = operation?.wordpress_admin;
    if (!admin) return;
    if (admin.password) {
      if (!out.json) {
        out.write('');
        out.write('WordPress administrator');
        out.one({ username: admin.username, password: admin.password, login_url: admin.login_url });
      }
      out.note(
        'The WordPress administrator password is shown this once: it will not be shown again. Keep it now, ' +
          `or sign in without it: ${BIN} installs sign-in ${install}`,
      );
    } else {
      out.note(
        `Sign in to WordPress as ${admin.username} without a password: ${BIN} installs sign-in ${install}`,
      );
    }
  };

  /** Follows an operation (with --wait): progress on stderr; OperationFailedError (exit 7) when it fails. */
  const follow = async (hp: HostplaneClient, operation: string): Promise<Operation> => {
    const progress = progressReporter(ctx.io);
    try {
      return await hp.waitForOperation(operation, { onProgress: (op) => progress.update(op) });
    } finally {
      progress.done();
    }
  };

  /** Prints what an asynchronous request started, and with --wait follows its operation. */
  const started = async (
    cmd: Command,
    hp: HostplaneClient,
    result: { data: unknown; location: string | null },
    wait: boolean | undefined,
  ) => {
    const out = printer(cmd);
    const operationUrl = result.location;
    const operation = wait && operationUrl ? await follow(hp, operationUrl) : null;
    if (out.json) {
      out.one({ data: result.data, operation_url: operationUrl, operation });
      return operation;
    }
    out.one(result.data);
    if (operation) out.note(`operation ${operation.id}: ${operation.status}`);
    else if (operationUrl)
      out.note(`started; follow it with: ${BIN} operations get ${operationUrl.split('/').pop()} --wait`);
    return operation;
  };

  /**
   * `--dry-run` on the commands whose route takes `?dry_run=true`: the API runs every check and
   * answers what it would do; nothing is changed and nothing is waited for.
   */
  const dryRunOption = (cmd: Command, example = commandLine(cmd)) =>
    cmd
      .option('--dry-run', 'only show what the API would do (every check runs; nothing is changed)')
      .addHelpText('after', `  $ ${BIN} ${example} --dry-run`);
  const dryRunQuery = (dryRun: boolean | undefined) => (dryRun ? { query: { dry_run: true } } : {});
  /** Prints a dry run's answer (the API's own record with --json); never follows an operation. */
  const dryRan = (cmd: Command, data: unknown) => {
    const out = printer(cmd);
    out.one(data);
    if (!out.json) out.note('dry run: nothing was changed');
  };

  // ---------------------------------------------------------------- accounts (read only)
  const accounts = group(program, 'accounts', 'The accounts this credential belongs to', 'accounts list');
  listOptions(command(accounts, 'list', 'List accounts', 'accounts list --json')).action(
    async (opts, cmd) => {
      const page = await client(cmd).get('/v1/accounts', {
        params: { query: { limit: opts.limit, offset: opts.offset } },
      });
      printer(cmd).list(page, ['id', 'name', 'nickname']);
    },
  );
  command(accounts, 'get <account>', 'Show one account', 'accounts get 6f1c...').action(
    async (id, _o, cmd) => {
      printer(cmd).one(
        await client(cmd).get('/v1/accounts/{account_id}', {
          params: { path: { account_id: await resolve(cmd).account(id) } },
        }),
      );
    },
  );

  // ---------------------------------------------------------------- sites
  const sites = group(program, 'sites', 'Sites (a group of installs)', 'sites list --account <account>');
  listOptions(
    command(sites, 'list', 'List sites', 'sites list --account <account>').option(
      '--account <account>',
      'only this account',
    ),
  ).action(async (opts, cmd) => {
    const page = await client(cmd).get('/v1/sites', {
      params: {
        query: {
          limit: opts.limit,
          offset: opts.offset,
          ...(opts.account && { account_id: await resolve(cmd).account(opts.account) }),
        },
      },
    });
    printer(cmd).list(page, ['id', 'name', 'account', 'group_name', 'tags', 'installs']);
  });
  command(sites, 'get <site>', 'Show one site', 'sites get <site>').action(async (id, _o, cmd) => {
    printer(cmd).one(
      await client(cmd).get('/v1/sites/{site_id}', {
        params: { path: { site_id: await resolve(cmd).site(id) } },
      }),
    );
  });
  command(sites, 'create', 'Create a site', 'sites create --account <account> --name "Shop"')
    .requiredOption('--account <account>', 'account of the site')
    .requiredOption('--name <name>', 'name of the site')
    .option('--group <name>', 'group name')
    .option('--tag <tag>', 'a tag (repeat for more)', collect)
    .action(async (opts, cmd) => {
      const { data } = await client(cmd).post('/v1/sites', {
        body: {
          account_id: await resolve(cmd).account(opts.account),
          name: opts.name,
          ...(opts.group && { group_name: opts.group }),
          ...(opts.tag && { tags: opts.tag }),
        },
      });
      printer(cmd).one(data);
    });
  command(sites, 'update <site>', 'Change a site', 'sites update <site> --name "New name" --tag eu')
    .option('--name <name>', 'new name')
    .option('--group <name>', 'new group name ("" clears it)')
    .option('--tag <tag>', 'replace the tags (repeat for more)', collect)
    .action(async (id, opts, cmd) => {
      const { data } = await client(cmd).patch('/v1/sites/{site_id}', {
        params: { path: { site_id: await resolve(cmd).site(id) } },
        body: {
          ...(opts.name !== undefined && { name: opts.name }),
          ...(opts.group !== undefined && { group_name: opts.group === '' ? null : opts.group }),
          ...(opts.tag && { tags: opts.tag }),
        },
      });
      printer(cmd).one(data);
    });
  command(sites, 'delete <site>', 'Delete an empty site', 'sites delete <site>').action(
    async (id, _o, cmd) => {
      await client(cmd).delete('/v1/sites/{site_id}', {
        params: { path: { site_id: await resolve(cmd).site(id) } },
      });
      printer(cmd).one(null);
    },
  );

  // ---------------------------------------------------------------- installs
  const installs = group(
    program,
    'installs',
    'Installs (environments of a site)',
    'installs list --account <account>',
  );
  listOptions(
    command(installs, 'list', 'List installs', 'installs list --account <account>').option(
      '--account <account>',
      'only this account',
    ),
  ).action(async (opts, cmd) => {
    const page = await client(cmd).get('/v1/installs', {
      params: {
        query: {
          limit: opts.limit,
          offset: opts.offset,
          ...(opts.account && { account_id: await resolve(cmd).account(opts.account) }),
        },
      },
    });
    printer(cmd).list(page, ['id', 'name', 'environment', 'status', 'site', 'primary_domain']);
  });
  command(installs, 'get <install>', 'Show one install', 'installs get <install>').action(
    async (id, _o, cmd) => {
      printer(cmd).one(
        await client(cmd).get('/v1/installs/{install_id}', {
          params: { path: { install_id: await resolve(cmd).install(id) } },
        }),
      );
    },
  );
  command(
    installs,
    'create',
    'Create an install; --wait follows its provisioning',
    'installs create --account <id> --site <site> --name shop --env production --wait',
  )
    .requiredOption('--account <account>', 'account of the install')
    .requiredOption('--name <name>', 'install name (3-14 lowercase letters and digits)')
    .option('--site <site>', 'site of the install')
    .addOption(
      new Option('--env <environment>', 'environment').choices(['production', 'staging', 'development']),
    )
    .option('--wait', 'follow the provisioning until it completes or fails')
    .action(async (opts, cmd) => {
      const hp = client(cmd);
      const { data } = await hp.post('/v1/installs', {
        body: {
          account_id: await resolve(cmd).account(opts.account),
          name: opts.name,
          ...(opts.site && { site_id: await resolve(cmd).site(opts.site) }),
          ...(opts.env && { environment: opts.env }),
        },
      });
      let location: string | null = null;
      if (opts.wait) {
        const ops = await hp.get('/v1/installs/{install_id}/operations', {
          params: { path: { install_id: data.id } },
        });
        const provision = ops.results.find((op) => op.type === 'provision_install');
        location = provision ? provision.id : null;
      }
      const operation = await started(cmd, hp, { data, location }, opts.wait);
      showAdmin(printer(cmd), operation, data.name);
    });
  command(
    installs,
    'sign-in <install>',
    "A single-use link that signs you in to the install's WordPress admin (no password needed)",
    'installs sign-in myblog',
  ).action(async (install, _o, cmd) => {
    const { data } = await client(cmd).post('/v1/installs/{install_id}/wordpress_sign_in', {
      params: { path: { install_id: await resolve(cmd).install(install) } },
    });
    const out = printer(cmd);
    if (out.json) return out.one(data);
    out.write(data.url);
    out.note(
      `Open it in your browser before ${data.expires_at}: it works once.` +
        (data.simulated
          ? ' This host is simulated (HOSTING_DRIVER=simulated): the link leads to no real site.'
          : ''),
    );
  });
  command(
    installs,
    'update <install>',
    'Move an install to another site or environment',
    'installs update <install> --env staging',
  )
    .option('--site <site>', 'move to this site')
    .addOption(
      new Option('--env <environment>', 'environment').choices(['production', 'staging', 'development']),
    )
    .action(async (id, opts, cmd) => {
      const { data } = await client(cmd).patch('/v1/installs/{install_id}', {
        params: { path: { install_id: await resolve(cmd).install(id) } },
        body: {
          ...(opts.site && { site_id: await resolve(cmd).site(opts.site) }),
          ...(opts.env && { environment: opts.env }),
        },
      });
      printer(cmd).one(data);
    });
  dryRunOption(
    command(installs, 'delete <install>', 'Delete an install and its records', 'installs delete <install>'),
  ).action(async (id, opts, cmd) => {
    const { data } = await client(cmd).delete('/v1/installs/{install_id}', {
      params: { path: { install_id: await resolve(cmd).install(id) }, ...dryRunQuery(opts.dryRun) },
    });
    if (opts.dryRun) return dryRan(cmd, data);
    printer(cmd).one(null);
  });

  // ---------------------------------------------------------------- domains
  const domains = group(program, 'domains', "An install's domains", 'domains list <install>');
  listOptions(
    command(domains, 'list <install>', 'List the domains of an install', 'domains list <install>'),
  ).action(async (install, opts, cmd) => {
    const page = await client(cmd).get('/v1/installs/{install_id}/domains', {
      params: {
        path: { install_id: await resolve(cmd).install(install) },
        query: { limit: opts.limit, offset: opts.offset },
      },
    });
    printer(cmd).list(page, [
      'id',
      'name',
      'primary',
      'ownership_status',
      'txt_verification_key',
      'txt_verification_value',
    ]);
  });
  command(
    domains,
    'get <install> <domain-id>',
    'Show one domain',
    'domains get <install> <domain-id>',
  ).action(async (install, domain, _o, cmd) => {
    printer(cmd).one(
      await client(cmd).get('/v1/installs/{install_id}/domains/{domain_id}', {
        params: { path: { install_id: await resolve(cmd).install(install), domain_id: domain } },
      }),
    );
  });
  command(
    domains,
    'create <install> <name>',
    'Add a domain (then verify its TXT record)',
    'domains create <install> www.example.com',
  )
    .option('--primary', 'make it the primary domain')
    .option('--redirect-to <domain-id>', 'redirect it to another domain of the install')
    .action(async (install, name, opts, cmd) => {
      const { data } = await client(cmd).post('/v1/installs/{install_id}/domains', {
        params: { path: { install_id: await resolve(cmd).install(install) } },
        body: {
          name,
          ...(opts.primary && { primary: true }),
          ...(opts.redirectTo && { redirect_to: opts.redirectTo }),
        },
      });
      printer(cmd).one(data);
    });
  dryRunOption(
    command(
      domains,
      'update <install> <domain-id>',
      'Set primary, redirect or secure_all_urls',
      'domains update <install> <domain-id> --primary',
    ),
  )
    .option('--primary', 'make it the primary domain')
    .option('--redirect-to <domain-id>', 'redirect to this domain ("nil" removes the redirect)')
    .option('--secure-all-urls <bool>', 'true or false')
    .action(async (install, domain, opts, cmd) => {
      const { data } = await client(cmd).patch('/v1/installs/{install_id}/domains/{domain_id}', {
        params: {
          path: { install_id: await resolve(cmd).install(install), domain_id: domain },
          ...dryRunQuery(opts.dryRun),
        },
        body: {
          ...(opts.primary && { primary: true }),
          ...(opts.redirectTo && { redirect_to: opts.redirectTo }),
          ...(opts.secureAllUrls !== undefined && { secure_all_urls: opts.secureAllUrls === 'true' }),
        },
      });
      if (opts.dryRun) return dryRan(cmd, data);
      printer(cmd).one(data);
    });
  command(
    domains,
    'delete <install> <domain-id>',
    'Remove a domain',
    'domains delete <install> <domain-id>',
  ).action(async (install, domain, _o, cmd) => {
    await client(cmd).delete('/v1/installs/{install_id}/domains/{domain_id}', {
      params: { path: { install_id: await resolve(cmd).install(install), domain_id: domain } },
    });
    printer(cmd).one(null);
  });
  const verify = async (install: string, domain: string, cmd: Command) => {
    const { data } = await client(cmd).post('/v1/installs/{install_id}/domains/{domain_id}/verification', {
      params: { path: { install_id: await resolve(cmd).install(install), domain_id: domain } },
    });
    printer(cmd).one(data);
  };
  command(
    domains,
    'verify <install> <domain-id>',
    'Look the TXT ownership record up now',
    'domains verify <install> <domain-id>',
  ).action((install, domain, _o, cmd) => verify(install, domain, cmd));

  // ---------------------------------------------------------------- ssl certificates
  const ssl = group(program, 'ssl', "An install's SSL certificates", 'ssl list <install>');
  listOptions(
    command(ssl, 'list <install>', 'List the certificates of an install', 'ssl list <install>'),
  ).action(async (install, opts, cmd) => {
    const page = await client(cmd).get('/v1/installs/{install_id}/ssl_certificates', {
      params: {
        path: { install_id: await resolve(cmd).install(install) },
        query: { limit: opts.limit, offset: opts.offset },
      },
    });
    const out = printer(cmd);
    if (out.json) return out.one(page);
    out.write(
      page.certificates.length
        ? table(page.certificates, ['uuid', 'common_name', 'domains', 'status', 'expires_time', 'issuer'])
        : '(none)',
    );
    if (page.next_page_token) out.note(`more with --offset ${page.next_page_token}`);
  });
  dryRunOption(
    command(
      ssl,
      'import <install>',
      'Import a certificate chain (PEM, the end-entity certificate first) and its private key; the key is never printed',
      'ssl import <install> --cert fullchain.pem --key privkey.pem',
    ),
    'ssl import <install> --cert fullchain.pem --key privkey.pem',
  )
    .requiredOption('--cert <file>', 'PEM file: the certificate, then its intermediates')
    .requiredOption('--key <file>', 'PEM file: the unencrypted private key (keep it mode 0600)')
    .action(async (install, opts, cmd) => {
      const body = {
        certificate: readPem(opts.cert, 'certificate').toString('base64'),
        private_key: readPem(opts.key, 'private key', ctx.io).toString('base64'),
      };
      const { data } = await client(cmd).post('/v1/installs/{install_id}/ssl_certificates/third_party', {
        params: { path: { install_id: await resolve(cmd).install(install) }, ...dryRunQuery(opts.dryRun) },
        body,
      });
      if (opts.dryRun) return dryRan(cmd, data);
      const out = printer(cmd);
      if (out.json) return out.one(data);
      // The stored chain (base64 PEM) is long: --json has it.
      const { certificate: _chain, ...shown } = data as Record<string, unknown>;
      out.one(shown);
    });

  // ---------------------------------------------------------------- backups
  const backups = group(program, 'backups', "An install's backups", 'backups list <install>');
  listOptions(
    command(
      backups,
      'list <install>',
      'List the backups of an install, newest first',
      'backups list <install>',
    ),
  ).action(async (install, opts, cmd) => {
    const page = await client(cmd).get('/v1/installs/{install_id}/backups', {
      params: {
        path: { install_id: await resolve(cmd).install(install) },
        query: { limit: opts.limit, offset: opts.offset },
      },
    });
    printer(cmd).list(page, ['id', 'status', 'description', 'create_time', 'complete_time']);
  });
  command(
    backups,
    'get <install> <backup-id>',
    'Show one backup',
    'backups get <install> <backup-id>',
  ).action(async (install, backup, _o, cmd) => {
    printer(cmd).one(
      await client(cmd).get('/v1/installs/{install_id}/backups/{backup_id}', {
        params: { path: { install_id: await resolve(cmd).install(install), backup_id: backup } },
      }),
    );
  });
  const backupAction = async (
    install: string,
    opts: { description: string; email?: string[]; wait?: boolean },
    cmd: Command,
  ) => {
    const hp = client(cmd);
    const result = await hp.post('/v1/installs/{install_id}/backups', {
      params: { path: { install_id: await resolve(cmd).install(install) } },
      body: { description: opts.description, notification_emails: opts.email ?? [] },
    });
    await started(cmd, hp, result, opts.wait);
  };
  const backupOptions = (cmd: Command) =>
    cmd
      .option('--description <text>', 'what the backup is for', 'hostplane-cli backup')
      .option('--email <address>', 'mail the result to this address (repeat for more)', collect)
      .option('--wait', 'follow the backup until it completes (exit 7 when it fails)');
  backupOptions(
    command(backups, 'create <install>', 'Take a backup', 'backups create <install> --wait'),
  ).action((install, opts, cmd) => backupAction(install, opts, cmd));
  const restoreAction = async (
    install: string,
    backup: string,
    opts: { email?: string[]; wait?: boolean; dryRun?: boolean },
    cmd: Command,
  ) => {
    const hp = client(cmd);
    const result = await hp.post('/v1/installs/{install_id}/backups/{backup_id}/restore', {
      params: {
        path: { install_id: await resolve(cmd).install(install), backup_id: backup },
        ...dryRunQuery(opts.dryRun),
      },
      body: { notification_emails: opts.email ?? [] },
    });
    if (opts.dryRun) return dryRan(cmd, result.data);
    await started(cmd, hp, result, opts.wait);
  };
  const restoreOptions = (cmd: Command) =>
    dryRunOption(cmd)
      .option('--email <address>', 'mail the result to this address (repeat for more)', collect)
      .option('--wait', 'follow the restore until it completes (exit 7 when it fails)');
  restoreOptions(
    command(
      backups,
      'restore <install> <backup-id>',
      "Restore an install from a backup (overwrites the install's files and database)",
      'backups restore <install> <backup-id> --wait',
    ),
  ).action((install, backup, opts, cmd) => restoreAction(install, backup, opts, cmd));

  // ---------------------------------------------------------------- actions (top level)
  backupOptions(
    command(program, 'backup <install>', 'Take a backup of an install', 'backup <install> --wait --json'),
  ).action((install, opts, cmd) => backupAction(install, opts, cmd));
  restoreOptions(
    command(
      program,
      'restore <install> <backup-id>',
      "Restore an install from a backup (overwrites the install's files and database)",
      'restore <install> <backup-id> --wait',
    ),
  ).action((install, backup, opts, cmd) => restoreAction(install, backup, opts, cmd));
  dryRunOption(
    command(
      program,
      'copy <from-install> <to-install>',
      "Copy one install's files and/or database over another",
      'copy <production> <staging> --no-database --wait',
    ),
  )
    .option('--no-files', 'do not copy the files')
    .option('--no-database', 'do not copy the database')
    .option('--table <name>', 'copy only these database tables (repeat for more)', collect)
    .option('--email <address>', 'mail the result to this address (repeat for more)', collect)
    .option('--wait', 'follow the copy until it completes (exit 7 when it fails)')
    .action(async (from, to, opts, cmd) => {
      const hp = client(cmd);
      const result = await hp.post('/v1/install_copy', {
        ...(opts.dryRun && { params: { query: { dry_run: true } } }),
        body: {
          source_environment_id: await resolve(cmd).install(from),
          destination_environment_id: await resolve(cmd).install(to),
          notification_emails: opts.email ?? [],
          custom_options: {
            include_files: opts.files,
            include_db: opts.database,
            ...(opts.table && { db_tables: opts.table }),
          },
        },
      });
      if (opts.dryRun) return dryRan(cmd, result.data);
      await started(cmd, hp, result, opts.wait);
    });
  command(program, 'purge <install>', "Purge an install's cache", 'purge <install> --type cdn --wait')
    .addOption(new Option('--type <cache>', 'which cache').choices(['object', 'page', 'cdn']).default('page'))
    .option('--wait', 'follow the purge until it completes')
    .action(async (install, opts, cmd) => {
      const hp = client(cmd);
      const result = await hp.post('/v1/installs/{install_id}/purge_cache', {
        params: { path: { install_id: await resolve(cmd).install(install) } },
        body: { type: opts.type },
      });
      await started(cmd, hp, result, opts.wait);
    });
  dryRunOption(
    command(
      program,
      'transfer <site>',
      'Transfer a site to another account',
      'transfer <site> --to <account> --at 2026-06-01T14:30:00Z',
    ),
    'transfer <site> --to <account>',
  )
    .requiredOption('--to <account>', 'destination account')
    .option('--at <date-time>', 'when (RFC 3339, 1 hour to 7 days ahead; default: now)')
    .option('--maintenance-mode', 'keep the site in maintenance mode during the transfer')
    .option('--wait', 'follow the transfer until it completes (exit 7 when it fails)')
    .action(async (site, opts, cmd) => {
      const hp = client(cmd);
      const result = await hp.post('/v1/sites/{site_id}/site_transfers', {
        params: { path: { site_id: await resolve(cmd).site(site) }, ...dryRunQuery(opts.dryRun) },
        body: {
          destination_account_id: await resolve(cmd).account(opts.to),
          ...(opts.at && { scheduled_time: opts.at }),
          ...(opts.maintenanceMode && { maintenance_mode: true }),
        },
      });
      if (opts.dryRun) return dryRan(cmd, result.data);
      await started(cmd, hp, result, opts.wait);
    });
  command(
    program,
    'verify <install> <domain-id>',
    "Verify a domain's TXT ownership record now",
    'verify <install> <domain-id>',
  ).action((install, domain, _o, cmd) => verify(install, domain, cmd));

  // ---------------------------------------------------------------- site transfers
  const transfers = group(program, 'transfers', 'Site transfers', 'transfers list <site>');
  listOptions(
    command(transfers, 'list <site>', 'List the transfers of a site', 'transfers list <site>'),
  ).action(async (site, opts, cmd) => {
    const page = await client(cmd).get('/v1/sites/{site_id}/site_transfers', {
      params: {
        path: { site_id: await resolve(cmd).site(site) },
        query: { limit: opts.limit, offset: opts.offset },
      },
    });
    printer(cmd).list(page, ['id', 'status', 'destination_account', 'scheduled_time', 'created_at']);
  });
  command(
    transfers,
    'get <site> <transfer-id>',
    'Show one transfer',
    'transfers get <site> <transfer-id>',
  ).action(async (site, transfer, _o, cmd) => {
    printer(cmd).one(
      await client(cmd).get('/v1/sites/{site_id}/site_transfers/{transfer_id}', {
        params: { path: { site_id: await resolve(cmd).site(site), transfer_id: transfer } },
      }),
    );
  });
  command(
    transfers,
    'cancel <site> <transfer-id>',
    'Cancel a transfer that has not started',
    'transfers cancel <site> <transfer-id>',
  ).action(async (site, transfer, _o, cmd) => {
    await client(cmd).delete('/v1/sites/{site_id}/site_transfers/{transfer_id}', {
      params: { path: { site_id: await resolve(cmd).site(site), transfer_id: transfer } },
    });
    printer(cmd).one(null);
  });

  // ---------------------------------------------------------------- ssh keys
  const keys = group(program, 'ssh-keys', "The credential's user's SSH keys", 'ssh-keys list');
  listOptions(command(keys, 'list', 'List SSH keys', 'ssh-keys list')).action(async (opts, cmd) => {
    const page = await client(cmd).get('/v1/ssh_keys', {
      params: { query: { limit: opts.limit, offset: opts.offset } },
    });
    printer(cmd).list(page, ['uuid', 'fingerprint', 'comment', 'created_at']);
  });
  command(keys, 'create', 'Add an SSH public key', 'ssh-keys create --key-file ~/.ssh/id_ed25519.pub')
    .option('--key <public-key>', 'the public key text')
    .option('--key-file <path>', 'read the public key from this file')
    .action(async (opts, cmd) => {
      const key: string | undefined =
        opts.key ?? (opts.keyFile ? fs.readFileSync(opts.keyFile, 'utf8').trim() : undefined);
      if (!key) throw new CliError('Give --key or --key-file', EXIT.usage);
      const { data } = await client(cmd).post('/v1/ssh_keys', { body: { public_key: key } });
      printer(cmd).one(data);
    });
  command(keys, 'delete <ssh-key-id>', 'Delete an SSH key', 'ssh-keys delete <ssh-key-id>').action(
    async (id, _o, cmd) => {
      await client(cmd).delete('/v1/ssh_keys/{ssh_key_id}', { params: { path: { ssh_key_id: id } } });
      printer(cmd).one(null);
    },
  );

  // ---------------------------------------------------------------- account users
  const ROLES = ['owner', 'full', 'full,billing', 'partial', 'partial,billing'];
  const users = group(program, 'users', "An account's users and their roles", 'users list <account>');
  listOptions(
    command(users, 'list <account>', 'List the users of an account', 'users list <account>'),
  ).action(async (account, opts, cmd) => {
    const page = await client(cmd).get('/v1/accounts/{account_id}/account_users', {
      params: {
        path: { account_id: await resolve(cmd).account(account) },
        query: { limit: opts.limit, offset: opts.offset },
      },
    });
    printer(cmd).list(page, ['user_id', 'email', 'first_name', 'last_name', 'roles', 'invite_accepted']);
  });
  command(
    users,
    'get <account> <user-id>',
    'Show one user of an account',
    'users get <account> <user-id>',
  ).action(async (account, user, _o, cmd) => {
    printer(cmd).one(
      await client(cmd).get('/v1/accounts/{account_id}/account_users/{user_id}', {
        params: { path: { account_id: await resolve(cmd).account(account), user_id: user } },
      }),
    );
  });
  dryRunOption(
    command(
      users,
      'create <account>',
      'Add a user to an account (they get an invitation)',
      'users create <account> --email ana@example.com --first-name Ana --last-name Diaz --roles full',
    ),
  )
    .requiredOption('--email <address>', 'e-mail address')
    .requiredOption('--first-name <name>', 'first name')
    .requiredOption('--last-name <name>', 'last name')
    .addOption(new Option('--roles <roles>', 'roles').choices(ROLES).makeOptionMandatory())
    .option('--install <install>', 'an install a partial user may see (repeat for more)', collect)
    .action(async (account, opts, cmd) => {
      const { data } = await client(cmd).post('/v1/accounts/{account_id}/account_users', {
        params: { path: { account_id: await resolve(cmd).account(account) }, ...dryRunQuery(opts.dryRun) },
        body: {
          user: {
            account_id: await resolve(cmd).account(account),
            email: opts.email,
            first_name: opts.firstName,
            last_name: opts.lastName,
            roles: opts.roles,
            ...(opts.install && {
              install_ids: await Promise.all(opts.install.map((i: string) => resolve(cmd).install(i))),
            }),
          },
        },
      });
      if (opts.dryRun) return dryRan(cmd, data);
      printer(cmd).one(data);
    });
  dryRunOption(
    command(
      users,
      'update <account> <user-id>',
      "Change a user's roles",
      'users update <account> <user-id> --roles partial --install <install>',
    ),
  )
    .addOption(new Option('--roles <roles>', 'roles').choices(ROLES).makeOptionMandatory())
    .option('--install <install>', 'an install a partial user may see (repeat for more)', collect)
    .action(async (account, user, opts, cmd) => {
      const { data } = await client(cmd).patch('/v1/accounts/{account_id}/account_users/{user_id}', {
        params: {
          path: { account_id: await resolve(cmd).account(account), user_id: user },
          ...dryRunQuery(opts.dryRun),
        },
        body: {
          roles: opts.roles,
          ...(opts.install && {
            install_ids: await Promise.all(opts.install.map((i: string) => resolve(cmd).install(i))),
          }),
        },
      });
      if (opts.dryRun) return dryRan(cmd, data);
      printer(cmd).one(data);
    });
  dryRunOption(
    command(
      users,
      'delete <account> <user-id>',
      'Remove a user from an account',
      'users delete <account> <user-id>',
    ),
  ).action(async (account, user, opts, cmd) => {
    const { data } = await client(cmd).delete('/v1/accounts/{account_id}/account_users/{user_id}', {
      params: {
        path: { account_id: await resolve(cmd).account(account), user_id: user },
        ...dryRunQuery(opts.dryRun),
      },
    });
    if (opts.dryRun) return dryRan(cmd, data);
    printer(cmd).one(null);
  });

  // ---------------------------------------------------------------- operations
  const operations = group(
    program,
    'operations',
    'Asynchronous operations',
    'operations get <operation-id> --wait',
  );
  command(
    operations,
    'get <operation-id>',
    'Show an operation; --wait follows it to its end',
    'operations get <operation-id> --wait',
  )
    .option('--wait', 'follow it until it completes (exit 7 when it fails)')
    .action(async (id, opts, cmd) => {
      const hp = client(cmd);
      const op = opts.wait
        ? await follow(hp, id)
        : await hp.get('/v1/operations/{operation_id}', { params: { path: { operation_id: id } } });
      const out = printer(cmd);
      out.one(op);
      if (op.wordpress_admin?.password)
        out.note('The WordPress administrator password is shown this once: it will not be shown again.');
    });
  listOptions(
    command(
      operations,
      'list <install>',
      "An install's operations, newest first",
      'operations list <install>',
    ),
  ).action(async (install, opts, cmd) => {
    const page = await client(cmd).get('/v1/installs/{install_id}/operations', {
      params: {
        path: { install_id: await resolve(cmd).install(install) },
        query: { limit: opts.limit, offset: opts.offset },
      },
    });
    printer(cmd).list(page, ['id', 'type', 'status', 'created_at', 'completed_at', 'error']);
  });

  // ---------------------------------------------------------------- profiles
  const profiles = group(
    program,
    'profile',
    'Named credentials in the profile file (mode 0600)',
    'profile list',
  );
  command(
    profiles,
    'set <name>',
    'Save a profile (the password from HOSTPLANE_PASSWORD, else stdin)',
    'profile set default --url https://hosting.example.com --username hp_1234 < password.txt',
  )
    .requiredOption('--url <url>', 'where Hostplane serves')
    .requiredOption('--username <name>', 'the API credential')
    .action(async (name, opts) => {
      const password = ctx.env.HOSTPLANE_PASSWORD || (await ctx.readStdin()).trim();
      if (!password)
        throw new CliError('No password: set HOSTPLANE_PASSWORD or pipe it on stdin', EXIT.usage);
      const file = profilesFile(ctx.env);
      saveProfile(file, name, { url: opts.url, username: opts.username, password });
      ctx.io.stderr.write(`saved profile "${name}" in ${file} (mode 0600)\n`);
    });
  command(profiles, 'list', 'List the profiles (never their passwords)', 'profile list').action(
    async (_o, cmd) => {
      const all = readProfiles(profilesFile(ctx.env));
      const rows = Object.entries(all).map(([name, p]) => ({ name, url: p.url, username: p.username }));
      const out = printer(cmd);
      if (out.json) out.one(rows);
      else out.write(rows.length ? table(rows, ['name', 'url', 'username']) : '(none)');
    },
  );

  // ---------------------------------------------------------------- completion
  command(
    program,
    'completion <shell>',
    'Print a completion script for bash or zsh',
    'completion bash >> ~/.bashrc',
  )
    .addHelpText('after', `  $ ${BIN} completion zsh > "\${fpath[1]}/_${BIN}"`)
    .action((shell: string) => {
      if (shell !== 'bash' && shell !== 'zsh')
        throw new CliError(`No completion for "${shell}": bash or zsh`, EXIT.usage);
      ctx.io.stdout.write(completionScript(program, shell));
    });

  return program;
}

/** Largest PEM file read: far above any chain or key the API takes (it answers 400 for those). */
const MAX_PEM_BYTES = 1024 * 1024;

const FILE_ERRORS: Record<string, string> = {
  ENOENT: 'no such file',
  EACCES: 'permission denied',
  EISDIR: 'not a regular file',
};

/**
 * Reads a PEM file given on the command line: a missing, unreadable or oversized file is a usage
 * error (exit 2) naming the file. With `io` (the private key), a file group or others may read gets a
 * warning on stderr (decision 126): the key is already exposed there, and refusing would not undo it.
 */
function readPem(file: string, what: string, io?: Io): Buffer {
  let stat: fs.Stats;
  let content: Buffer;
  try {
    stat = fs.statSync(file);
    if (!stat.isFile()) throw new Error('not a regular file');
    if (stat.size > MAX_PEM_BYTES) throw new Error(`larger than ${MAX_PEM_BYTES} bytes`);
    content = fs.readFileSync(file);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const reason = (code && FILE_ERRORS[code]) ?? (error as Error).message;
    throw new CliError(`Cannot read the ${what} file ${file}: ${reason}`, EXIT.usage);
  }
  if (content.length === 0) throw new CliError(`The ${what} file ${file} is empty`, EXIT.usage);
  const mode = stat.mode & 0o777;
  if (io && (mode & 0o077) !== 0) {
    io.stderr.write(
      `warning: the ${what} file ${file} has mode ${mode.toString(8).padStart(4, '0')}: others on this machine ` +
        `may read it. Make it private with: chmod 600 ${file}\n`,
    );
  }
  return content;
}

/** The words that run `cmd` (`users delete <account> <user-id>`), for help examples. */
function commandLine(cmd: Command): string {
  const names: string[] = [];
  for (let at: Command | null = cmd; at?.parent; at = at.parent) names.unshift(at.name());
  return [...names, ...cmd.registeredArguments.map((a) => `<${a.name()}>`)].join(' ');
}
