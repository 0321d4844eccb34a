import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { sql } from 'drizzle-orm';
import fc from 'fast-check';
import { ROLES } from '../../src/auth/access.js';
import { factories } from './factories.js';
import { ADMIN_TOKEN, basic, type Json, type TestApp } from './harness.js';
import { readyWorld } from './jobs.js';

/**
 * Property-based fuzzing of the whole HTTP surface (issue 13), driven by Hostplane's own OpenAPI
 * document (`/v1/swagger`): every operation, every role, with wrong types, missing and extra fields,
 * hostile strings (NUL, lone surrogates, RTL marks, 1 MB), odd numbers (-0, 1e309, 2^63), odd JSON
 * (duplicate keys, deep nesting, invalid UTF-8), wrong content types and path ids that are not uuids.
 * Checks on every response: no 5xx, no stack trace, every 4xx in the error shape (G7/G8), and a
 * rejected request changes no row (a checksum of the data tables before and after).
 */

const HOSTILE_STRINGS = [
  '',
  ' ',
  'a\u0000b',
  '\u0000',
  'a\uD800b',
  '\uDC00',
  '\u202Eevil\u202C',
  '\u200F',
  '\uFEFFbom',
  '\u{1F4A9}',
  'é',
  "' OR 1=1 --",
  '../../etc/passwd',
  '%00',
  '<script>alert(1)</script>',
  'x'.repeat(300),
];
const ODD_QUERY = [
  '-0',
  '1e309',
  '-1e309',
  'Infinity',
  'NaN',
  '9223372036854775808',
  '1.5',
  '',
  'abc',
  '%00',
  'true',
];
/** Numbers JSON.stringify cannot write: placed as sentinels, then spliced into the JSON text. */
const ODD_NUMBERS = ['-0', '1e309', '-1e309', '9223372036854775808', '1e-400', '0.1e1', '-9007199254740993'];
const sentinel = (n: string) => `__num:${n}__`;
const ODD_PATH_IDS = [
  'not-a-uuid',
  '0',
  '%00',
  'a'.repeat(250),
  '%ZZ',
  '..',
  '%C3%A9',
  '00000000-0000-0000-0000-00000000000g',
];
const CONTENT_TYPES = [
  'text/plain',
  'application/xml',
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=x',
  'application/json; charset=latin1',
];

type Schema = Json;

interface Operation {
  method: string;
  path: string;
  pathParams: string[];
  query: { name: string; schema: Schema }[];
  body: Schema | null;
}

export interface FuzzRequest {
  op: Operation;
  client: string;
  url: string;
  payload?: string | Buffer;
  contentType?: string;
}

export interface FuzzStats {
  requests: number;
  routes: Map<string, number>;
  statuses: Map<number, number>;
  rejectedChecked: number;
}

function operationsOf(doc: Json): Operation[] {
  const ops: Operation[] = [];
  for (const [path, item] of Object.entries(doc.paths as Record<string, Json>)) {
    for (const method of ['get', 'post', 'put', 'patch', 'delete']) {
      const op = item[method];
      if (!op) continue;
      const params = (op.parameters ?? []) as Json[];
      ops.push({
        method: method.toUpperCase(),
        path,
        pathParams: params.filter((p) => p.in === 'path').map((p) => p.name),
        query: params.filter((p) => p.in === 'query').map((p) => ({ name: p.name, schema: p.schema ?? {} })),
        body: op.requestBody?.content?.['application/json']?.schema ?? null,
      });
    }
  }
  return ops;
}

/** A value for a JSON schema: mostly plausible, often hostile. */
function valueFor(schema: Schema, ids: string[], depth = 0): fc.Arbitrary<unknown> {
  if (!schema || typeof schema !== 'object' || depth > 4) return fc.jsonValue({ maxDepth: 2 });
  const alternatives = schema.anyOf ?? schema.oneOf;
  if (Array.isArray(alternatives))
    return fc.oneof(...alternatives.map((s: Schema) => valueFor(s, ids, depth + 1)));
  if (Array.isArray(schema.enum))
    return fc.oneof(fc.constantFrom(...schema.enum), fc.constantFrom(...HOSTILE_STRINGS));
  if (schema.const !== undefined) return fc.constant(schema.const);
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
  switch (type) {
    case 'string':
      if (schema.format === 'uuid')
        return fc.oneof(fc.constantFrom(...ids), fc.uuid(), fc.constantFrom(...HOSTILE_STRINGS));
      if (schema.format === 'email') return fc.oneof(fc.emailAddress(), fc.constantFrom(...HOSTILE_STRINGS));
      return fc.oneof(
        fc.string({ maxLength: Math.min(schema.maxLength ?? 40, 60), unit: 'grapheme' }),
        fc.constantFrom(...HOSTILE_STRINGS),
        fc.string({ maxLength: 20, unit: 'binary' }),
      );
    case 'integer':
    case 'number':
      return fc.oneof(
        fc.integer({ min: schema.minimum ?? -10, max: Math.min(schema.maximum ?? 1000, 1_000_000) }),
        fc.constantFrom(...ODD_NUMBERS.map(sentinel)),
        fc.double({ noNaN: true, noDefaultInfinity: true }),
      );
    case 'boolean':
      return fc.boolean();
    case 'null':
      return fc.constant(null);
    case 'array':
      return fc.array(valueFor(schema.items ?? {}, ids, depth + 1), { maxLength: 3 });
    case 'object': {
      const props = Object.entries((schema.properties ?? {}) as Record<string, Schema>);
      const required = new Set<string>(schema.required ?? []);
      return fc.record(Object.fromEntries(props.map(([k, s]) => [k, valueFor(s, ids, depth + 1)])), {
        requiredKeys: props.map(([k]) => k).filter((k) => required.has(k)),
      });
    }
    default:
      return fc.jsonValue({ maxDepth: 2 });
  }
}

/** The body of a request: a mutated schema value, or odd JSON text, or odd bytes. */
function bodyFor(
  schema: Schema | null,
  ids: string[],
): fc.Arbitrary<{ payload?: string | Buffer; contentType?: string }> {
  const value = schema ? valueFor(schema, ids) : fc.jsonValue({ maxDepth: 2 });
  const json = (v: unknown) => JSON.stringify(v).replace(/"__num:([^"]+)__"/g, (_m, n: string) => n);
  const mutated = fc
    .tuple(
      value,
      fc.constantFrom('as-is', 'drop', 'extra', 'wrong-type', 'as-is', 'as-is'),
      fc.jsonValue({ maxDepth: 1 }),
    )
    .map(([v, how, extra]) => {
      if (!v || typeof v !== 'object' || Array.isArray(v)) return v;
      const copy: Record<string, unknown> = { ...(v as Record<string, unknown>) };
      const keys = Object.keys(copy);
      if (how === 'drop' && keys[0]) delete copy[keys[0]];
      if (how === 'extra') copy[`extra_${keys.length}`] = extra;
      if (how === 'wrong-type' && keys[0]) copy[keys[0]] = extra;
      return copy;
    });
  return fc.oneof(
    { weight: 6, arbitrary: mutated.map((v) => ({ payload: json(v), contentType: 'application/json' })) },
    {
      weight: 1,
      arbitrary: mutated.map((v) => {
        // Duplicate keys: the same object written twice into one JSON text.
        const text = json(v);
        const dup = text.startsWith('{') && text.length > 2 ? `{${text.slice(1, -1)},${text.slice(1)}` : text;
        return { payload: dup, contentType: 'application/json' };
      }),
    },
    {
      weight: 1,
      arbitrary: fc
        .constantFrom(
          `${'['.repeat(20_000)}${']'.repeat(20_000)}`,
          `${'{"a":'.repeat(5_000)}1${'}'.repeat(5_000)}`,
          '{"name": "truncated',
          '',
          'null',
          '[]',
          '"just a string"',
          '{"__proto__": {"admin": true}}',
          '{"constructor": {"prototype": {"x": 1}}}',
          `{"name": "${'x'.repeat(1_000_000)}"}`,
        )
        .map((payload) => ({ payload, contentType: 'application/json' })),
    },
    {
      weight: 1,
      arbitrary: fc.constantFrom([0xff], [0xc0, 0xaf], [0xed, 0xa0, 0x80], [0xe2, 0x82]).map((bytes) => ({
        payload: Buffer.concat([Buffer.from('{"name": "'), Buffer.from(bytes), Buffer.from('"}')]),
        contentType: 'application/json',
      })),
    },
    {
      weight: 1,
      arbitrary: fc
        .tuple(mutated, fc.constantFrom(...CONTENT_TYPES, undefined))
        .map(([v, contentType]) => ({ payload: json(v), ...(contentType && { contentType }) })),
    },
  );
}

const STACK_TRACE = /\n\s+at |node:internal|\.ts:\d+:\d+|\.js:\d+:\d+/;

function assertErrorShape(status: number, body: Json, where: string) {
  assert.ok(
    body && typeof body === 'object' && typeof body.message === 'string',
    `${where}: ${status} body ${JSON.stringify(body)?.slice(0, 300)}`,
  );
  if (status === 400 || status === 422) {
    assert.ok(Array.isArray(body.errors), `${where}: ${status} without errors[]`);
    for (const e of body.errors) {
      for (const k of ['resource', 'field', 'type', 'code', 'message']) {
        assert.equal(typeof e[k], 'string', `${where}: errors[].${k} ${JSON.stringify(e)}`);
      }
      assert.ok(
        ['invalid_value', 'access_error', 'value_unavailable'].includes(e.type),
        `${where}: type ${e.type}`,
      );
    }
  }
}

/** A checksum of every data table (credentials' last use and job bookkeeping left out). */
async function dataChecksum(t: TestApp, tables: string[]): Promise<string> {
  const parts = tables.map(
    (name) => `(select coalesce(md5(string_agg(t::text, '|' order by t::text)), '') from "${name}" t)`,
  );
  const result = await t.database.db.execute(sql.raw(`select md5(${parts.join(' || ')}) as sum`));
  const rows = (Array.isArray(result) ? result : (result as { rows: Json[] }).rows) as { sum: string }[];
  return rows[0]?.sum ?? '';
}

async function dataTables(t: TestApp): Promise<string[]> {
  const result = await t.database.db.execute(
    sql.raw(
      `select table_name from information_schema.tables where table_schema = 'public' and table_type = 'BASE TABLE' order by 1`,
    ),
  );
  const rows = (Array.isArray(result) ? result : (result as { rows: Json[] }).rows) as {
    table_name: string;
  }[];
  return rows.map((r) => r.table_name).filter((name) => !name.startsWith('__drizzle'));
}

/**
 * Runs `requests` generated requests with the given seed against the app. Throws (fast-check's
 * counterexample, shrunk) on the first broken property.
 */
export async function fuzz(t: TestApp, options: { requests: number; seed: number }): Promise<FuzzStats> {
  const f = factories(t);
  const w = await readyWorld(t, f);
  const domain = (
    await w.owner.client.post(`/v1/installs/${w.install.id}/domains`, {
      name: `fuzz-${randomUUID().slice(0, 8)}.example.test`,
    })
  ).body;
  const members: Record<string, string> = { owner: w.owner.authorization };
  for (const role of ROLES) {
    if (role === 'owner') continue;
    const m = await f.user([
      {
        account_id: w.account.id,
        roles: role,
        ...(role.startsWith('partial') && { install_ids: [w.install.id] }),
      },
    ]);
    members[role] = m.authorization;
  }
  const stranger = await f.user([]);
  const headers: Record<string, string | undefined> = {
    ...members,
    stranger: stranger.authorization,
    anonymous: undefined,
    wrongPassword: basic(w.owner.username, 'not-the-password-123'),
    nulUser: basic('a\u0000b', 'password-123456'),
    admin: `Bearer ${ADMIN_TOKEN}`,
  };
  const ids = [w.account.id, w.site.id, w.install.id, domain.id, w.owner.userId];
  const byName: Record<string, string> = {
    account_id: w.account.id,
    site_id: w.site.id,
    install_id: w.install.id,
    domain_id: domain.id,
    user_id: w.owner.userId,
  };
  const doc = (await t.anonymous.get('/v1/swagger')).body;
  const ops = operationsOf(doc);
  const tables = await dataTables(t);
  const stats: FuzzStats = { requests: 0, routes: new Map(), statuses: new Map(), rejectedChecked: 0 };

  const request = fc.constantFrom(...ops).chain((op) =>
    fc.record({
      op: fc.constant(op),
      client: fc.constantFrom(...Object.keys(headers)),
      params: fc.tuple(
        ...op.pathParams.map((name) =>
          fc.oneof(
            { weight: 4, arbitrary: fc.constant(byName[name] ?? randomUUID()) },
            { weight: 1, arbitrary: fc.uuid() },
            { weight: 2, arbitrary: fc.constantFrom(...ODD_PATH_IDS) },
          ),
        ),
      ),
      query: fc.array(
        fc.oneof(
          ...(op.query.length > 0
            ? [
                fc.tuple(
                  fc.constantFrom(...op.query.map((q) => q.name)),
                  fc.oneof(
                    fc.constantFrom(...ODD_QUERY),
                    fc.constantFrom(...ids),
                    fc.string({ maxLength: 10 }),
                  ),
                ),
              ]
            : []),
          fc.tuple(fc.constant('extra'), fc.constantFrom(...ODD_QUERY)),
        ),
        { maxLength: 3 },
      ),
      body:
        op.method === 'GET' || op.method === 'DELETE'
          ? fc.constant<{ payload?: string | Buffer; contentType?: string }>({})
          : bodyFor(op.body, ids),
    }),
  );

  await fc.assert(
    fc.asyncProperty(request, async ({ op, client, params, query, body }) => {
      let i = 0;
      const path = op.path.replace(/\{\w+\}/g, () => String(params[i++]));
      const search = query
        .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(String(v))}`.replace('%2500', '%00'))
        .join('&');
      const url = search ? `${path}?${search}` : path;
      const where = `${op.method} ${op.path} as ${client}: ${url.slice(0, 200)}`;
      const before = await dataChecksum(t, tables);
      const auth = headers[client];
      const res = await t.app.inject({
        method: op.method as 'GET',
        url,
        headers: {
          ...(auth && { authorization: auth }),
          ...(body.contentType && { 'content-type': body.contentType }),
        },
        ...(body.payload !== undefined && { payload: body.payload }),
      });
      stats.requests++;
      stats.routes.set(`${op.method} ${op.path}`, (stats.routes.get(`${op.method} ${op.path}`) ?? 0) + 1);
      stats.statuses.set(res.statusCode, (stats.statuses.get(res.statusCode) ?? 0) + 1);
      assert.ok(res.statusCode < 500, `${where}: ${res.statusCode} ${res.body.slice(0, 500)}`);
      assert.ok(!STACK_TRACE.test(res.body), `${where}: stack trace in ${res.body.slice(0, 500)}`);
      if (res.statusCode >= 400) {
        let parsed: Json;
        try {
          parsed = JSON.parse(res.body);
        } catch {
          assert.fail(`${where}: ${res.statusCode} body is not JSON: ${res.body.slice(0, 200)}`);
        }
        assertErrorShape(res.statusCode, parsed, where);
        assert.equal(
          await dataChecksum(t, tables),
          before,
          `${where}: a rejected request (${res.statusCode}) changed data`,
        );
        stats.rejectedChecked++;
      }
    }),
    { numRuns: options.requests, seed: options.seed, endOnFailure: true },
  );
  return stats;
}

export function formatStats(stats: FuzzStats, seed: number): string {
  const statuses = [...stats.statuses].sort((a, b) => a[0] - b[0]).map(([s, n]) => `${s}: ${n}`);
  return [
    `fuzz seed ${seed}: ${stats.requests} requests over ${stats.routes.size} routes`,
    `statuses: ${statuses.join(', ')}`,
    `5xx: ${[...stats.statuses].filter(([s]) => s >= 500).reduce((n, [, c]) => n + c, 0)}`,
    `rejected requests checked for unchanged data: ${stats.rejectedChecked}`,
  ].join('\n');
}
