/** One entry of `errors[]` in a 400 or 422 body (the API's G7 shape, src/http/error-handler.ts). */
export interface ApiFieldError {
  resource: string;
  field: string;
  type: 'invalid_value' | 'access_error' | 'value_unavailable' | (string & {});
  code: string;
  message: string;
}

/** The body of every error answer: `message`, and `errors` on 400 and 422. */
export interface ApiErrorBody {
  message: string;
  errors?: ApiFieldError[];
}

/** What kind of failure an error is: each maps to one status class of the API. */
export type ErrorKind =
  | 'unauthenticated' // 401
  | 'forbidden' // 403
  | 'not_found' // 404
  | 'validation' // 400, 422
  | 'conflict' // 409
  | 'rate_limited' // 429
  | 'unavailable' // 503, 502, 504, or no answer at all
  | 'server' // other 5xx
  | 'other'; // any other 4xx (413, 415, ...)

export function kindOf(status: number): ErrorKind {
  if (status === 401) return 'unauthenticated';
  if (status === 403) return 'forbidden';
  if (status === 404) return 'not_found';
  if (status === 400 || status === 422) return 'validation';
  if (status === 409) return 'conflict';
  if (status === 429) return 'rate_limited';
  if (status === 502 || status === 503 || status === 504) return 'unavailable';
  if (status >= 500) return 'server';
  return 'other';
}

/** Base of every error the client throws. */
export class HostplaneError extends Error {
  override name = 'HostplaneError';
  constructor(
    message: string,
    readonly kind: ErrorKind,
  ) {
    super(message);
  }
}

/** The API answered with an error status; `body` is its error body (G7). */
export class HostplaneApiError extends HostplaneError {
  override name = 'HostplaneApiError';
  readonly fieldErrors: ApiFieldError[];
  constructor(
    readonly status: number,
    readonly body: ApiErrorBody,
    readonly method: string,
    readonly url: string,
    /** Seconds from `Retry-After` (429, 503), when given. */
    readonly retryAfter: number | null = null,
  ) {
    super(body.message || `HTTP ${status}`, kindOf(status));
    this.fieldErrors = body.errors ?? [];
  }
}

export class UnauthenticatedError extends HostplaneApiError {
  override name = 'UnauthenticatedError';
}
export class ForbiddenError extends HostplaneApiError {
  override name = 'ForbiddenError';
}
export class NotFoundError extends HostplaneApiError {
  override name = 'NotFoundError';
}
/** 400 or 422: `fieldErrors` names each invalid field. */
export class ValidationError extends HostplaneApiError {
  override name = 'ValidationError';
}
export class ConflictError extends HostplaneApiError {
  override name = 'ConflictError';
}
export class RateLimitedError extends HostplaneApiError {
  override name = 'RateLimitedError';
}
/** 5xx. */
export class ServerError extends HostplaneApiError {
  override name = 'ServerError';
}

/** No answer: the server could not be reached (refused, reset, DNS, timeout). */
export class ConnectionError extends HostplaneError {
  override name = 'ConnectionError';
  constructor(
    message: string,
    override readonly cause: unknown,
  ) {
    super(message, 'unavailable');
  }
}

/** An asynchronous operation ended in `failed`; `operation` is its last state. */
export class OperationFailedError extends HostplaneError {
  override name = 'OperationFailedError';
  constructor(readonly operation: { id: string; type: string; error: string | null }) {
    super(
      `Operation ${operation.id} (${operation.type}) failed: ${operation.error ?? 'no reason given'}`,
      'other',
    );
  }
}

/** The typed error of an error answer. */
export function apiError(
  status: number,
  body: unknown,
  method: string,
  url: string,
  retryAfter: number | null,
): HostplaneApiError {
  const parsed: ApiErrorBody =
    body && typeof body === 'object' && typeof (body as ApiErrorBody).message === 'string'
      ? (body as ApiErrorBody)
      : { message: typeof body === 'string' && body ? body : `HTTP ${status}` };
  const args = [status, parsed, method, url, retryAfter] as const;
  switch (kindOf(status)) {
    case 'unauthenticated':
      return new UnauthenticatedError(...args);
    case 'forbidden':
      return new ForbiddenError(...args);
    case 'not_found':
      return new NotFoundError(...args);
    case 'validation':
      return new ValidationError(...args);
    case 'conflict':
      return new ConflictError(...args);
    case 'rate_limited':
      return new RateLimitedError(...args);
    case 'unavailable':
    case 'server':
      return new ServerError(...args);
    default:
      return new HostplaneApiError(...args);
  }
}
