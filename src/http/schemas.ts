import { type TSchema, Type } from 'typebox';

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
