import { appendFileSync, readFileSync } from 'node:fs';
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';

/**
 * Wire conformance (issue 13): every response the API tests receive is validated against the
 * platform's published description (test/reference/platform-openapi-1.17.json, Swagger 2.0) for its
 * operation and status. The harness wraps `app.inject` with {@link checkWire}, so a drift fails the
 * test whose request caused it, naming the operation, the status and the JSON path.
 *
 * Rules taken from the document (test/reference/README.md):
 * - a field the document does not mark `x-nullable` is never `null` (omit it or send its type);
 * - enums take only their documented values (`null` only when the field is `x-nullable`);
 * - `format: int64` on a string is a decimal integer in a string;
 * - responses that `$ref` into `definitions` (most 429/502/503) document no body: not checked;
 * - a status the operation does not list: 4xx/5xx bodies must have the document's error shape
 *   (BadRequestErrorResponse for 400/422, `{message}` otherwise); any other status is a drift.
 * Routes the document does not have (Hostplane's own extensions) are skipped by {@link EXTENSIONS}
 * only: an unlisted route that is not in the document fails, so a new route is either checked or
 * consciously listed here.
 */

// biome-ignore lint/suspicious/noExplicitAny: the reference document is arbitrary JSON.
type Json = any;
type JsonSchema = Record<string, unknown>;

const REFERENCE_FILE = new URL('../reference/platform-openapi-1.17.json', import.meta.url);
const BASE_PATH = '/v1';
const REF_ID = 'platform';

/**
 * Hostplane routes that are not operations of the reference document, by method and template
 * (`{}` stands for any path parameter). A `*` suffix covers a whole prefix.
 */
export const EXTENSIONS: readonly string[] = [
  // The operator API (design.md): not part of the platform's interface.
  'ANY /admin/v1/*',
  // Issue 30: the hosting servers' agents.
  'ANY /agent/v1/*',
  // Probes and the interactive documentation.
  'GET /healthz',
  'GET /readyz',
  // Prometheus metrics (text, not JSON).
  'GET /metrics',
  'GET /docs*',
  // Issue 23: the web console's static files (HTML, JS, CSS), or a 404 when it is not built.
  'GET /console*',
  // Operations of asynchronous work (G10): the URL of every 202's Location header.
  'GET /v1/operations/{}',
  'GET /v1/installs/{}/operations',
  // An invitation's single-use link (U1-U4): the token is the credential.
  'POST /v1/invitations/{}/accept',
  // The file behind an archive's signed download_uri, and behind a site report's download_url.
  'GET /v1/installs/{}/archives/{}/download',
  'GET /v1/site_reports/{}/download',
  // The site-report operations published after 1.17 (shared/spec/reference/README.md): the document
  // has no schema for them; their shapes are asserted field by field in test/api/site-reports.test.ts.
  'GET /v1/site_reports',
  'GET /v1/site_reports/sections',
  'ANY /v1/site_reports/schedules*',
  // Issue 22: scoped credentials and the audit log of an account (their shapes are asserted in
  // test/api/credentials.test.ts and test/api/audit.test.ts).
  'ANY /v1/accounts/{}/credentials*',
  'GET /v1/accounts/{}/audit_events',
  // Issue 22: events and webhook endpoints (their shapes are this service's own, checked by the
  // response schemas and asserted in test/api/events.test.ts and webhooks.test.ts).
  'GET /v1/accounts/{}/events',
  'ANY /v1/accounts/{}/webhook_endpoints*',
  // Issue 29: a single-use WordPress sign-in link (its shape is the route's response schema, asserted
  // in test/api/local-web-sign-in-browser.test.ts).
  'POST /v1/installs/{}/wordpress_sign_in',
];

/** Statuses an operation answers that the document does not list, with the reason (none yet). */
export const EXTRA_SUCCESS_STATUSES: Readonly<Record<string, readonly number[]>> = {};

/**
 * Issue 22: a 200 answered to `?dry_run=true` is what the call would do, Hostplane's own answer (the
 * document has no dry run): its shape is the route's own response schema, asserted field by field in
 * test/api/dry-run.test.ts. Its errors are the call's and are checked as such.
 */
function isDryRunAnswer(url: string, status: number): boolean {
  return status === 200 && new URL(url, 'http://x').searchParams.get('dry_run') === 'true';
}

/**
 * Deliberate deviations from the document (docs/conformance.md), by `operationId status`: the schema
 * Hostplane answers instead, still built from the document's definitions so its parts cannot drift.
 */
export const DEVIATIONS: Readonly<Record<string, { reason: string; schema: Json }>> = {
  'createBulkDomains 201': {
    reason:
      'The document types the bulk answer as one DomainOrRedirect, which cannot carry the 1-50 created ' +
      'domains; Hostplane answers {domains: [Domain...]}, the same record as createDomain, in request ' +
      'order (docs/conformance.md, issue 13).',
    schema: {
      type: 'object',
      required: ['domains'],
      properties: { domains: { type: 'array', items: { $ref: '#/definitions/Domain' } } },
    },
  },
  'importThirdPartySSLCertificate 200': {
    reason:
      'rules.md L2: a successful import answers the certificate details, never the key, so the ' +
      "document's required private_key is left out; certificate (the stored chain) is kept.",
    schema: {
      allOf: [
        { $ref: '#/definitions/Certificate' },
        { type: 'object', required: ['certificate'], properties: { certificate: { type: 'string' } } },
      ],
    },
  },
};

const KEEP = ['type', 'required', 'pattern', 'minimum', 'maximum', 'minLength', 'maxLength'] as const;
const FORMATS = new Set(['uuid', 'date-time', 'date', 'uri']);

/** One Swagger 2.0 schema node -> JSON Schema (draft-07) for AJV. */
function convert(node: Json): JsonSchema {
  if (!node || typeof node !== 'object') return {};
  const nullable = node['x-nullable'] === true;
  if (typeof node.$ref === 'string') {
    const ref = { $ref: `${REF_ID}${node.$ref}` };
    return nullable ? { anyOf: [ref, { type: 'null' }] } : ref;
  }
  const out: JsonSchema = {};
  for (const key of KEEP) if (node[key] !== undefined) out[key] = node[key];
  if (node.type === 'file') delete out.type;
  if (typeof node.format === 'string') {
    if (FORMATS.has(node.format)) out.format = node.format;
    else if (node.format === 'int64' && node.type === 'string') out.pattern = '^-?[0-9]+$';
  }
  // Swagger's objects often omit `type: object` (Certificate): a schema with properties is an object.
  if (node.properties && node.type === undefined) out.type = 'object';
  if (node.properties) {
    out.properties = Object.fromEntries(
      Object.entries(node.properties as Record<string, Json>).map(([k, v]) => [k, convert(v)]),
    );
  }
  if (node.items) out.items = convert(node.items);
  if (node.additionalProperties && typeof node.additionalProperties === 'object') {
    out.additionalProperties = convert(node.additionalProperties);
  }
  if (Array.isArray(node.allOf)) out.allOf = node.allOf.map(convert);
  if (Array.isArray(node.enum)) {
    const values = (node.enum as unknown[]).filter((v) => v !== null);
    out.enum = nullable ? [...values, null] : values;
  }
  if (nullable && typeof out.type === 'string') out.type = [out.type, 'null'];
  return out;
}

interface Operation {
  id: string;
  responses: Record<string, Json>;
}

interface Reference {
  ajv: Ajv;
  /** `GET /v1/installs/{}` -> operation. */
  operations: Map<string, Operation>;
  validators: Map<string, ValidateFunction | null>;
}

let reference: Reference | undefined;

/** The reference document, converted and registered with AJV once per process. */
function loadReference(): Reference {
  if (reference) return reference;
  const doc: Json = JSON.parse(readFileSync(REFERENCE_FILE, 'utf8'));
  const ajv = new Ajv({ allErrors: true, strict: false });
  // ajv-formats is CommonJS: its default export is the module object under NodeNext.
  const addFormats = ((addFormatsModule as Json).default ?? addFormatsModule) as (a: Ajv) => Ajv;
  addFormats(ajv);
  const definitions = Object.fromEntries(
    Object.entries(doc.definitions as Record<string, Json>).map(([k, v]) => [k, convert(v)]),
  );
  ajv.addSchema({ $id: REF_ID, definitions });
  const operations = new Map<string, Operation>();
  for (const [path, item] of Object.entries(doc.paths as Record<string, Json>)) {
    for (const [method, op] of Object.entries(item as Record<string, Json>)) {
      if (method === 'parameters') continue;
      const key = `${method.toUpperCase()} ${templateKey(BASE_PATH + path)}`;
      operations.set(key, {
        id: op.operationId ?? `${method.toUpperCase()} ${path}`,
        responses: op.responses,
      });
    }
  }
  reference = { ajv, operations, validators: new Map() };
  return reference;
}

/** `/v1/installs/{install_id}` and `/v1/installs/:install_id` -> `/v1/installs/{}`. */
export function templateKey(path: string): string {
  return path
    .split('/')
    .map((s) => (s.startsWith(':') || /^\{.+\}$/.test(s) ? '{}' : s))
    .join('/');
}

const GENERIC_ERRORS: Record<string, Json> = {
  validation: { $ref: '#/definitions/BadRequestErrorResponse' },
  other: { $ref: '#/definitions/NotFoundErrorResponse' },
};

/** The schema of one operation's status: a JSON Schema, `null` (no body documented) or 'undocumented'. */
function responseSchema(op: Operation, status: number): Json | null | 'undocumented' {
  const deviation = DEVIATIONS[`${op.id} ${status}`];
  if (deviation) return deviation.schema;
  const response = op.responses[String(status)] ?? op.responses.default;
  if (!response) {
    if (status >= 400)
      return status === 400 || status === 422 ? GENERIC_ERRORS.validation : GENERIC_ERRORS.other;
    return 'undocumented';
  }
  // The quirk of the document: `"429": {"$ref": "#/definitions/TooManyRequestsOperation"}`, no body.
  if (response.$ref || !response.schema) return null;
  return response.schema;
}

function validatorFor(
  ref: Reference,
  op: Operation,
  status: number,
): ValidateFunction | null | 'undocumented' {
  const key = `${op.id} ${status}`;
  if (ref.validators.has(key)) return ref.validators.get(key) ?? null;
  const schema = responseSchema(op, status);
  if (schema === 'undocumented') return schema;
  const validate = schema ? ref.ajv.compile(convert(schema)) : null;
  ref.validators.set(key, validate);
  return validate;
}

interface Route {
  method: string;
  key: string;
  pattern: RegExp;
  /** Literal segments weigh 0, parameters 1: the router prefers static segments. */
  rank: number[];
}

const routeTables = new WeakMap<object, Route[]>();

function routeTable(routes: readonly { method: string; url: string }[]): Route[] {
  const cached = routeTables.get(routes);
  if (cached) return cached;
  const table = routes
    .filter((r) => !r.url.includes('*'))
    .map((r) => {
      const segments = r.url.split('/');
      const source = segments.map((s) => (s.startsWith(':') ? '[^/]+' : escapeRegExp(s))).join('/');
      return {
        method: r.method,
        key: templateKey(r.url),
        pattern: new RegExp(`^${source}/?$`),
        rank: segments.map((s) => (s.startsWith(':') ? 1 : 0)),
      };
    });
  routeTables.set(routes, table);
  return table;
}

const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

function compareRank(a: number[], b: number[]): number {
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    const d = (a[i] ?? 0) - (b[i] ?? 0);
    if (d !== 0) return d;
  }
  return a.length - b.length;
}

/** The template of the registered route that serves `method path`, or null (an unknown route). */
export function matchRoute(routes: readonly { method: string; url: string }[], method: string, path: string) {
  const candidates = routeTable(routes).filter((r) => r.method === method && r.pattern.test(path));
  candidates.sort((a, b) => compareRank(a.rank, b.rank));
  return candidates[0]?.key ?? null;
}

function isExtension(method: string, key: string): boolean {
  return EXTENSIONS.some((entry) => {
    const [m, p = ''] = entry.split(' ');
    if (m !== 'ANY' && m !== method) return false;
    return p.endsWith('*') ? key.startsWith(p.slice(0, -1)) : key === p;
  });
}

/** `/results/0/name` -> `$.results[0].name`. */
function jsonPath(instancePath: string): string {
  return `$${instancePath.replace(/\/(\d+)(?=\/|$)/g, '[$1]').replaceAll('/', '.')}`;
}

function describeErrors(errors: ErrorObject[] | null | undefined): string {
  return (errors ?? [])
    .map((e) => {
      const where = jsonPath(e.instancePath);
      const extra =
        e.keyword === 'enum'
          ? ` ${JSON.stringify((e.params as { allowedValues?: unknown[] }).allowedValues)}`
          : '';
      return `${where} ${e.message}${extra}`;
    })
    .join('; ');
}

export class WireDriftError extends Error {
  override name = 'WireDriftError';
}

/** WIRE_REPORT=<file>: append drifts to the file instead of failing (one sweep over the whole suite). */
const REPORT_FILE = process.env.WIRE_REPORT;

/**
 * Validates one response against the reference document. Throws a {@link WireDriftError} naming the
 * operation, the status and each JSON path that does not conform.
 */
export function checkWire(
  routes: readonly { method: string; url: string }[],
  method: string,
  url: string,
  status: number,
  body: string,
): void {
  try {
    check(routes, method, url, status, body);
  } catch (error) {
    if (!(error instanceof WireDriftError) || !REPORT_FILE) throw error;
    appendFileSync(REPORT_FILE, `${JSON.stringify(error.message)}\n`);
  }
}

function check(
  routes: readonly { method: string; url: string }[],
  method: string,
  url: string,
  status: number,
  body: string,
): void {
  const upper = method.toUpperCase();
  // HEAD and 304 Not Modified (conditional GET, issue 14) carry no body by definition.
  if (upper === 'HEAD' || upper === 'OPTIONS' || status === 304) return;
  if (isDryRunAnswer(url, status)) return;
  const path = new URL(url, 'http://x').pathname;
  const ref = loadReference();
  const key = matchRoute(routes, upper, path);
  if (!key) {
    // No route: the not-found handler, which must still answer the document's error shape.
    if (status === 404) validateBody(ref, { id: 'unknown route', responses: {} }, upper, path, status, body);
    return;
  }
  const op = ref.operations.get(`${upper} ${key}`);
  if (!op) {
    if (isExtension(upper, key)) return;
    throw new WireDriftError(
      `wire: ${upper} ${key} is neither an operation of the reference document nor listed in ` +
        'EXTENSIONS (test/support/wire.ts)',
    );
  }
  validateBody(ref, op, upper, key, status, body);
}

function validateBody(
  ref: Reference,
  op: Operation,
  method: string,
  path: string,
  status: number,
  body: string,
) {
  const validate = validatorFor(ref, op, status);
  if (validate === 'undocumented') {
    if (EXTRA_SUCCESS_STATUSES[op.id]?.includes(status)) return;
    throw new WireDriftError(
      `wire: ${op.id} (${method} ${path}) answered ${status}, a status it does not document`,
    );
  }
  if (!validate) return;
  let parsed: unknown;
  try {
    parsed = body.length > 0 ? JSON.parse(body) : undefined;
  } catch {
    throw new WireDriftError(`wire: ${op.id} (${method} ${path}) ${status}: the body is not JSON`);
  }
  if (!validate(parsed)) {
    throw new WireDriftError(
      `wire: ${op.id} (${method} ${path}) ${status} does not match the reference: ` +
        `${describeErrors(validate.errors)}\nbody: ${body.slice(0, 2000)}`,
    );
  }
}
