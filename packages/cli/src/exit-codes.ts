import { HostplaneError, OperationFailedError } from '@hostplane/client';

/**
 * hostplane-cli's exit codes: one per class of error, stable (scripts test them). Documented in
 * `hostplane-cli --help` and docs/reference.md (its "Command line client" section).
 */
export const EXIT = {
  ok: 0,
  /** A bug or an unexpected answer. */
  unexpected: 1,
  /** Bad command line: unknown command or option, missing argument, no credentials configured. */
  usage: 2,
  /** 401 or 403: wrong credential, or the role may not do this. */
  auth: 3,
  /** 404: no such resource (or not visible to this credential). */
  notFound: 4,
  /** 400 or 422: the API refused a value (its field errors are printed). */
  validation: 5,
  /** 409: the resource's state does not allow it now. */
  conflict: 6,
  /** An operation followed with --wait ended `failed`. */
  operationFailed: 7,
  /** 5xx, 429, or no answer: try again later. */
  unavailable: 8,
  /** The profile file is unsafe (group or others may read it) or unreadable. */
  profileFile: 9,
} as const;

export const EXIT_CODES_HELP = `Exit codes:
  0  ok
  1  unexpected error
  2  usage (bad command line, no credentials configured)
  3  authentication or permission (401, 403)
  4  not found (404)
  5  invalid request (400, 422; field errors are printed)
  6  conflict (409)
  7  operation failed (with --wait)
  8  server error or unavailable (5xx, 429, unreachable)
  9  profile file refused (permissions looser than 0600, or unreadable)`;

/** A failure the CLI itself reports (usage, profiles), with its exit code. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: number,
  ) {
    super(message);
  }
}

export function exitCodeOf(error: unknown): number {
  if (error instanceof CliError) return error.exitCode;
  if (error instanceof OperationFailedError) return EXIT.operationFailed;
  if (error instanceof HostplaneError) {
    switch (error.kind) {
      case 'unauthenticated':
      case 'forbidden':
        return EXIT.auth;
      case 'not_found':
        return EXIT.notFound;
      case 'validation':
        return EXIT.validation;
      case 'conflict':
        return EXIT.conflict;
      case 'rate_limited':
      case 'unavailable':
      case 'server':
        return EXIT.unavailable;
      default:
        return EXIT.unexpected;
    }
  }
  return EXIT.unexpected;
}
