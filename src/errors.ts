/** G7: the `type` of an `errors[]` entry. */
export type FieldErrorType = 'invalid_value' | 'access_error' | 'value_unavailable';

/** G7: one entry of `errors[]` in a 400 or 422 body. */
export interface FieldError {
  resource: string;
  field: string;
  type: FieldErrorType;
  code: string;
  message: string;
}

export type ErrorCode =
  | 'bad_request'
  | 'unauthenticated'
  | 'forbidden'
  | 'not_found'
  | 'conflict'
  | 'unprocessable'
  | 'payload_too_large'
  | 'unsupported_media_type'
  | 'rate_limited'
  | 'internal'
  | 'bad_upstream'
  | 'unavailable';

/** The status of each code; an exhaustive switch so a new code cannot be forgotten. */
export function statusOf(code: ErrorCode): number {
  switch (code) {
    case 'bad_request':
      return 400;
    case 'unauthenticated':
      return 401;
    case 'forbidden':
      return 403;
    case 'not_found':
      return 404;
    case 'conflict':
      return 409;
    case 'payload_too_large':
      return 413;
    case 'unsupported_media_type':
      return 415;
    case 'unprocessable':
      return 422;
    case 'rate_limited':
      return 429;
    case 'internal':
      return 500;
    case 'bad_upstream':
      return 502;
    case 'unavailable':
      return 503;
  }
}

/** The spec's fixed texts for Authentication Error, Not authorized and Not found (G2, G3, G4). */
export const MESSAGES = {
  badCredentials: 'Bad Credentials',
  noPermission: "You don't have permission to perform this action",
  notFound: 'Not Found',
} as const;

/** The one error type of the service. Rendered by `http/error-handler.ts`. */
export class AppError extends Error {
  readonly status: number;
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly fieldErrors: FieldError[] = [],
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = 'AppError';
    this.status = statusOf(code);
  }
}

function fieldError(resource: string, field: string, type: FieldErrorType, message: string, code?: string) {
  return { resource, field, type, code: code ?? type, message };
}

/** Factories: every error the service raises is made here, so codes and texts stay consistent. */
export const Errors = {
  unauthenticated: () => new AppError('unauthenticated', MESSAGES.badCredentials),
  forbidden: () => new AppError('forbidden', MESSAGES.noPermission),
  /** 403 that says why (a download link that is wrong or expired), not a missing role (G3). */
  forbiddenWith: (message: string) => new AppError('forbidden', message),
  notFound: () => new AppError('not_found', MESSAGES.notFound),
  /** 400 with one field error of type invalid_value. */
  invalidValue: (resource: string, field: string, message: string, code?: string) =>
    new AppError('bad_request', message, [fieldError(resource, field, 'invalid_value', message, code)]),
  /** 400 with one field error of type value_unavailable (a taken name, a busy slot). */
  valueUnavailable: (resource: string, field: string, message: string, code?: string) =>
    new AppError('bad_request', message, [fieldError(resource, field, 'value_unavailable', message, code)]),
  /** 400 with one field error of type access_error (a referenced resource the caller cannot use). */
  accessError: (resource: string, field: string, message: string, code?: string) =>
    new AppError('bad_request', message, [fieldError(resource, field, 'access_error', message, code)]),
  badRequest: (message: string, fieldErrors: FieldError[] = []) =>
    new AppError('bad_request', message, fieldErrors),
  conflict: (message: string) => new AppError('conflict', message),
  unprocessable: (message: string, fieldErrors: FieldError[] = []) =>
    new AppError('unprocessable', message, fieldErrors),
  payloadTooLarge: (limit: number) =>
    new AppError('payload_too_large', `Request body is larger than the limit of ${limit} bytes`),
  unsupportedMediaType: (type: string) =>
    new AppError('unsupported_media_type', `Unsupported Content-Type "${type}"; send application/json`),
  rateLimited: (retryAfterSeconds: number) =>
    new AppError('rate_limited', `Too many requests; retry in ${retryAfterSeconds} seconds`, [], {
      'retry-after': String(retryAfterSeconds),
    }),
  /** 429 with a message that says which limit was hit (not the generic rate limit). */
  tooManyRequests: (message: string, retryAfterSeconds: number) =>
    new AppError('rate_limited', message, [], { 'retry-after': String(retryAfterSeconds) }),
  unavailable: (message = 'Service temporarily unavailable; retry shortly') =>
    new AppError('unavailable', message),
  /** 503 with Retry-After: this process is at a bound (issue 20: the password-hash queue is full). */
  busy: (message: string, retryAfterSeconds: number) =>
    new AppError('unavailable', message, [], { 'retry-after': String(retryAfterSeconds) }),
  badUpstream: (message: string) => new AppError('bad_upstream', message),
  internal: () => new AppError('internal', 'Internal Server Error'),
};
