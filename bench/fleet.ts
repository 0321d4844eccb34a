/**
 * Issue 30: what the fleet benches share (fleet-provision, fleet-moves, fleet-silence). A real control
 * plane (`node dist/cli.js serve`, its worker in-process, the system clock) on a throwaway PostgreSQL
 * database, reached over HTTP; an account and an owner credential made through the admin API; agents
 * enrolled through it; and one clean-up list that runs at the end, on failure and on SIGINT/SIGTERM.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { type DbKind, prepareTarget } from './databases.js';
import { assertBuilt, type CliProcess, freePort, startCli } from './load.js';

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
export const loadavg = () =>
  os
    .loadavg()
    .map((n) => n.toFixed(2))
    .join(' ');

/** p50/p90/max of `xs` (nearest rank), rounded to `digits`. */
export function summary(xs: number[], digits = 2) {
  const s = [...xs].sort((a, b) => a - b);
  const at = (q: number) => s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))] ?? Number.NaN;
  const r = (x: number) => Math.round(x * 10 ** digits) / 10 ** digits;
  return { n: s.length, p50: r(at(0.5)), p90: r(at(0.9)), max: r(s.at(-1) ?? Number.NaN) };
}

/** What the bench must undo, newest first; run once (end, failure, signal). */
const undo: (() => unknown)[] = [];
let cleaning: Promise<void> | null = null;
export const onCleanup = (fn: () => unknown) => undo.push(fn);
export function cleanup(): Promise<void> {
  cleaning ??= (async () => {
    for (const fn of undo.reverse())
      try {
        await fn();
      } catch (err) {
        console.error(`clean-up: ${(err as Error).message}`);
      }
  })();
  return cleaning;
}
// Registered before test/support/netns.ts's own handlers (which remove the namespaces and re-raise the
// signal): the re-raised signal lands here again, so the rest of the clean-up runs before the exit.
for (const signal of ['SIGINT', 'SIGTERM'] as const)
  process.on(signal, () => {
    void cleanup().then(() => process.exit(130));
  });

export interface ApiAnswer {
  status: number;
  // biome-ignore lint/suspicious/noExplicitAny: API bodies are JSON read field by field.
  body: any;
}

/** A JSON client of one base URL with one Authorization header. */
export function client(base: string, authorization: string) {
  return async (method: string, route: string, body?: unknown): Promise<ApiAnswer> => {
    const res = await fetch(`${base}${route}`, {
      method,
      headers: { authorization, ...(body !== undefined && { 'content-type': 'application/json' }) },
      ...(body !== undefined && { body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(60_000),
    });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch {}
    return { status: res.status, body: parsed };
  };
}
export type Client = ReturnType<typeof client>;

/** Throws with the answer unless its status is `status`. */
export function expect(answer: ApiAnswer, status: number, what: string) {
  if (answer.status !== status) throw new Error(`${what}: ${answer.status} ${JSON.stringify(answer.body)}`);
  return answer.body;
}

export interface ControlPlane {
  base: string;
  process: CliProcess;
  databaseUrl: string;
  dataDir: string;
  admin: Client;
  /** An account (region `region`) and its owner's client. */
  owner: Client;
  accountId: string;
  region: string;
}

/**
 * Starts `hostplane serve` on a fresh PostgreSQL database (dropped at the clean-up), listening on
 * `host`, with `env` on top of the bench defaults; makes an account in `region` and its owner.
 */
export async function startControlPlane(
  name: string,
  env: Record<string, string>,
  host = '127.0.0.1',
  region = 'us-central',
): Promise<ControlPlane> {
  assertBuilt();
  const work = fs.mkdtempSync(path.join(os.tmpdir(), `hostplane-${name}-`));
  const target = await prepareTarget('postgres' as DbKind, work);
  onCleanup(() => target.drop());
  const adminToken = randomBytes(24).toString('hex');
  const dataDir = path.join(work, 'data');
  fs.mkdirSync(dataDir, { recursive: true });
  const port = await freePort();
  const started = await startCli(
    ['serve'],
    {
      ...target.env,
      DATA_DIR: dataDir,
      HOST: host,
      PORT: String(port),
      HOSTPLANE_ADMIN_TOKEN: adminToken,
      LOG_LEVEL: 'warn',
      ...env,
    },
    /Hostplane is serving (\S+)\/v1 /,
  );
  onCleanup(() => started.stop());
  // The ready line names loopback; the agents and this bench reach it on `host`.
  const base = `http://${host}:${port}`;
  const admin = client(base, `Bearer ${adminToken}`);
  const account = expect(
    await admin('POST', '/admin/v1/accounts', { name: `Bench ${name}`, preferred_data_center: region }),
    201,
    'account',
  );
  const user = expect(
    await admin('POST', '/admin/v1/users', {
      email: `${name}-${randomBytes(4).toString('hex')}@bench.hostplane.test`,
      first_name: 'Bench',
      last_name: 'Owner',
      memberships: [{ account_id: account.id, roles: 'owner' }],
    }),
    201,
    'user',
  );
  const cred = expect(await admin('POST', `/admin/v1/users/${user.id}/credentials`), 201, 'credential');
  const owner = client(base, `Basic ${Buffer.from(`${cred.username}:${cred.password}`).toString('base64')}`);
  return {
    base,
    process: started,
    databaseUrl: target.env.DATABASE_URL ?? '',
    dataDir,
    admin,
    owner,
    accountId: account.id,
    region,
  };
}

/** Enrols a server (region label, addresses): its id and one-time token. */
export async function enrol(cp: ControlPlane, name: string, ipv4: string[], installs = 100) {
  const body = expect(
    await cp.admin('POST', '/admin/v1/servers', {
      name,
      labels: { region: cp.region },
      ipv4,
      capacity: { installs },
    }),
    201,
    `enrol ${name}`,
  );
  return { id: body.server.id as string, token: body.enrolment.token as string };
}

/** Polls `probe` every `everyMs` until it is truthy; throws past `ms`. */
export async function until<T>(
  what: string,
  probe: () => Promise<T | null | undefined | false>,
  ms = 120_000,
  everyMs = 250,
): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(everyMs);
  }
}

/** The servers' statuses as the admin API lists them (id -> status). */
export async function statuses(cp: ControlPlane): Promise<Map<string, string>> {
  const body = expect(await cp.admin('GET', '/admin/v1/servers?limit=100'), 200, 'servers');
  return new Map((body.results as { id: string; status: string }[]).map((s) => [s.id, s.status]));
}

/** Creates a site and an install through the API: the install and its provision operation's id. */
export async function createInstall(cp: ControlPlane, name: string) {
  const site = expect(
    await cp.owner('POST', '/v1/sites', { name: `Site ${name}`, account_id: cp.accountId }),
    201,
    'site',
  );
  const sent = performance.now();
  const install = expect(
    await cp.owner('POST', '/v1/installs', {
      name,
      account_id: cp.accountId,
      site_id: site.id,
      environment: 'production',
    }),
    201,
    'install',
  );
  return { install, sent, site };
}

export function writeResults(name: string, json: unknown, md: string) {
  const dir = path.join('bench', 'results');
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, `${name}.json`), `${JSON.stringify(json, null, 2)}\n`);
  fs.writeFileSync(path.join(dir, `${name}.md`), md);
  process.stdout.write(md);
}

/** Runs a bench's `main`, then the clean-up (also when it failed), then exits. */
export async function runBench(main: () => Promise<void>) {
  try {
    await main();
  } finally {
    await cleanup();
  }
  // node:test's root (netns-hosting registers `after` hooks) would keep the process waiting.
  process.exit(0);
}
