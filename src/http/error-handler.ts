import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import {
  isCommitOutcomeUnknown,
  isDatabaseUnavailable,
  isStatementTimeout,
  isTransactionConflict,
} from '../db/errors.js';
import { AppError, Errors, type FieldError } from '../errors.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Name of the resource in errors[] entries (G7), e.g. `install`. */
    resource?: string;
    /**
     * G12: the spec's error table of this operation has no Bad Request, so a malformed path id (which
     * can name nothing) is a 404 Not Found rather than a 400. Query errors stay 400 (G5).
     */
    badPathIsNotFound?: boolean;
  }
}

interface AjvError {
  instancePath?: string;
  keyword: string;
  params?: Record<string, unknown>;
  message?: string;
}

/** `/domains/3/name` → `domains[3].name`: array items are indexed as in errors[] of bulk operations. */
function fieldName(error: AjvError): string {
  const base = (error.instancePath ?? '')
    .replace(/\/(\d+)(?=\/|$)/g, '[$1]')
    .replace(/^\//, '')
    .replaceAll('/', '.');
  const missing = error.keyword === 'required' ? String(error.params?.missingProperty ?? '') : '';
  return [base, missing].filter(Boolean).join('.') || '(body)';
}

/** G7: one errors[] entry per invalid field; a nullable union's alternatives merge into one message. */
export function validationFieldErrors(resource: string, context: string, errors: AjvError[]): FieldError[] {
  const byField = new Map<string, AjvError[]>();
  for (const error of errors) {
    const field = fieldName(error);
    byField.set(field, [...(byField.get(field) ?? []), error]);
  }
  return [...byField].map(([field, group]) => {
    const types = group.filter((e) => e.keyword === 'type').map((e) => String(e.params?.type));
    const others = group.filter((e) => e.keyword !== 'type' && e.keyword !== 'anyOf');
    const first = others[0] ?? group[0];
    const message =
      others.length === 0 && types.length > 0
        ? `must be ${types.join(' or ')}`
        : (first?.message ?? 'is invalid');
    const where = context === 'body' ? '' : ` (${context})`;
    return {
      resource,
      field,
      type: 'invalid_value' as const,
      code: others.length === 0 && types.length > 0 ? 'type' : (first?.keyword ?? 'invalid'),
      message: `${field}${where} ${message}`,
    };
  });
}

function toAppError(error: FastifyError, request: FastifyRequest): AppError | null {
  if (error instanceof AppError) return error;
  if (error.validation) {
    if (error.validationContext === 'params' && request.routeOptions.config?.badPathIsNotFound) {
      return Errors.notFound();
    }
    const resource = request.routeOptions.config?.resource ?? 'request';
    const fields = validationFieldErrors(
      resource,
      error.validationContext ?? 'body',
      error.validation as AjvError[],
    );
    const summary = fields.map((f) => f.message).join('; ');
    return Errors.badRequest(`Invalid request: ${summary}`, fields);
  }
  switch (error.code) {
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return Errors.unsupportedMediaType(String(request.headers['content-type'] ?? ''));
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return Errors.payloadTooLarge(request.routeOptions.bodyLimit ?? 0);
    case 'FST_ERR_BAD_URL':
      return Errors.badRequest('Malformed URL: invalid percent-encoding');
    case 'FST_ERR_MAX_PARAM_LENGTH':
      return Errors.badRequest('Malformed URL: a path parameter is too long');
    case 'FST_ERR_HANDLER_TIMEOUT':
      // The request budget (REQUEST_TIMEOUT_MS) passed: a dependency is too slow to answer (G11).
      return Errors.unavailable();
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return Errors.badRequest(`Malformed JSON body: ${error.message}`);
  }
  if (error instanceof SyntaxError) return Errors.badRequest(`Malformed JSON body: ${error.message}`);
  // The connection failed while a COMMIT was in flight: the change may have been made (decision 246).
  // The client is told so, not "retry": a blind retry of a create could make it twice.
  if (changeMayHaveBeenMade(error, request)) return Errors.unavailable(COMMIT_OUTCOME_UNKNOWN_MESSAGE);
  if (isDatabaseUnavailable(error)) return Errors.unavailable();
  // A statement past its budget (a lock held elsewhere, a slow database): the transaction was rolled
  // back, so the request changed nothing and may be sent again (G11), as for an unreachable database.
  if (isStatementTimeout(error)) {
    return Errors.unavailable('The database did not answer in time; nothing was changed, retry it');
  }
  // Two writes to the same accounts in opposite orders can deadlock (their data versions, decision
  // 49): the loser's transaction was rolled back whole, so it is safe and right to ask for a retry.
  if (isTransactionConflict(error)) {
    return Errors.unavailable(
      'A concurrent change conflicted with this request; nothing was changed, retry it',
    );
  }
  const status = error.statusCode ?? 500;
  if (status >= 400 && status < 500) {
    return status === 400 ? Errors.badRequest(error.message) : new AppError(codeFor(status), error.message);
  }
  return null;
}

function codeFor(status: number): AppError['code'] {
  switch (status) {
    case 401:
      return 'unauthenticated';
    case 403:
      return 'forbidden';
    case 404:
      return 'not_found';
    case 409:
      return 'conflict';
    case 413:
      return 'payload_too_large';
    case 415:
      return 'unsupported_media_type';
    case 429:
      return 'rate_limited';
    default:
      return 'bad_request';
  }
}

/**
 * A request that asks for a change whose commit's answer was lost (decision 246). A read's own
 * bookkeeping (a credential's last use) is no change the client asked for: a read keeps the plain 503.
 */
function changeMayHaveBeenMade(error: unknown, request: FastifyRequest): boolean {
  return request.method !== 'GET' && request.method !== 'HEAD' && isCommitOutcomeUnknown(error);
}

/** A 503 whose change may have been made: the database went away while committing it. */
export const COMMIT_OUTCOME_UNKNOWN_MESSAGE =
  'The database stopped answering while this change was being committed: it may have been made. Look for it before sending the request again';

/** Retry-After of a 503: about how long a database failover or restart takes to be noticed. */
export const RETRY_AFTER_SECONDS = 5;

/** The one error renderer: AppError, validation and Fastify errors, and unknown errors (a bare 500). */
export function errorHandler(error: FastifyError, request: FastifyRequest, reply: FastifyReply) {
  const appError = toAppError(error, request);
  if (!appError) {
    // G8: no stack trace in the response; logged once, with the request id pino already carries.
    request.log.error({ err: error }, 'unhandled error');
    return reply.status(500).send({ message: 'Internal Server Error' });
  }
  if (appError.status === 503) {
    const unknownOutcome = changeMayHaveBeenMade(error, request);
    request.log.warn({ err: error }, unknownOutcome ? 'commit outcome unknown' : 'dependency unavailable');
    // An Idempotency-Key claimed for a change that may have been made is not given back (a 5xx's
    // key otherwise is, so that a retry runs): a retry with it waits for the claim's lock timeout
    // (409 with Retry-After) instead of making the change a second time at once.
    if (unknownOutcome && request.idempotency) request.idempotency.token = null;
    // Every 503 says when to come back (G11); a more precise value from the error wins.
    reply.header('retry-after', String(RETRY_AFTER_SECONDS));
  }
  reply.headers(appError.headers);
  const body =
    appError.status === 400 || appError.status === 422
      ? { message: appError.message, errors: appError.fieldErrors }
      : { message: appError.message };
  return reply.status(appError.status).send(body);
}

/** Unknown routes: 404 JSON. */
export function notFoundHandler(_request: FastifyRequest, reply: FastifyReply) {
  return reply.status(404).send({ message: 'Not Found' });
}
