import { type TProperties, type TSchema, Type } from 'typebox';

/** A uuid string (path params, ids in bodies). */
export const Uuid = (options: { description?: string } = {}) => Type.String({ format: 'uuid', ...options });

/** `T | null`, rendered as anyOf in the OpenAPI document. */
export const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);

export const DateTime = () => Type.String({ format: 'date-time' });

/** G7: one entry of errors[]. */
export const FieldErrorSchema = Type.Object({
  resource: Type.String(),
  field: Type.String(),
  type: Type.String({ enum: ['invalid_value', 'access_error', 'value_unavailable'] }),
  code: Type.String(),
  message: Type.String(),
});

/** G7: Bad Request and Unprocessable Entity. */
export const ValidationErrorSchema = Type.Object(
  {
    message: Type.String(),
    documentation_url: Type.Optional(Type.String()),
    errors: Type.Array(FieldErrorSchema),
  },
  { description: 'Bad Request / Unprocessable Entity' },
);

/** G8: every other error. */
export const ErrorSchema = Type.Object(
  { message: Type.String(), documentation_url: Type.Optional(Type.String()) },
  { description: 'Error' },
);

const ERROR_DESCRIPTIONS: Record<number, string> = {
  400: 'Bad Request',
  401: 'Authentication Error',
  403: 'Not authorized',
  404: 'Not found',
  409: 'Conflict',
  413: 'Payload Too Large',
  415: 'Unsupported Media Type',
  422: 'Unprocessable Entity',
  429: 'Too many requests',
  500: 'Internal Server Error',
  502: 'invalid response from an upstream server',
  503: 'Service unavailable',
};

export type ErrorStatus = 400 | 401 | 403 | 404 | 409 | 413 | 415 | 422 | 429 | 500 | 502 | 503;

/**
 * Response schemas for the error statuses a route can answer. 401, 429, 500 and 503 can happen on
 * any authenticated route (bad credentials, rate limit, a bug, the database down), so they are
 * always included; 413/415 on routes with a body.
 */
export function errorResponses(...statuses: ErrorStatus[]): Record<number, TSchema> {
  const all = new Set<ErrorStatus>([...statuses, 401, 429, 500, 503]);
  const out: Record<number, TSchema> = {};
  for (const status of [...all].sort()) {
    const base = status === 400 || status === 422 ? ValidationErrorSchema : ErrorSchema;
    out[status] = { ...base, description: ERROR_DESCRIPTIONS[status] };
  }
  return out;
}

/** Errors of a public route without auth. */
export function publicErrorResponses(): Record<number, TSchema> {
  return {
    429: { ...ErrorSchema, description: ERROR_DESCRIPTIONS[429] },
    503: { ...ErrorSchema, description: ERROR_DESCRIPTIONS[503] },
  };
}

/** Issue 22: `?dry_run=true` runs every check of the call and answers what it would do, changing nothing. */
export const DryRunQuery = Type.Object({
  dry_run: Type.Optional(
    Type.Boolean({
      default: false,
      description:
        'true: run every check of the call and answer 200 with what it would do (no row, no job, no mail, no event)',
    }),
  ),
});

/** `?dry_run=true` (or `1`), read before or after validation: the call changes nothing. */
export function isDryRun(request: { query: unknown }): boolean {
  const value = (request.query as Record<string, unknown> | undefined)?.dry_run;
  return value === true || value === 'true' || value === '1';
}

/**
 * Issue 22: the 200 a `?dry_run=true` call answers: `dry_run: true` and what the call would do,
 * documented with an example (decisions.md #110).
 */
export function DryRunAnswer<P extends TProperties>(
  properties: P,
  doc: { description: string; example: Record<string, unknown> },
) {
  return Type.Object(
    { dry_run: Type.Literal(true), ...properties },
    {
      description: `Dry run: ${doc.description}; nothing was changed`,
      examples: [{ dry_run: true, ...doc.example }],
    },
  );
}

/**
 * The 200 of a route whose own success is a 200 too: the dry run's answer or the call's. The dry run
 * comes first (the serializer takes the first schema that matches, and only it has `dry_run`).
 */
export const OrDryRun = <D extends TSchema, R extends TSchema>(dryRun: D, real: R) =>
  Type.Union([dryRun, real], {
    description: `${(real as { description?: string }).description ?? 'OK'}; with \`?dry_run=true\`, what the call would do`,
  });
