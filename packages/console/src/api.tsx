import {
  type HostplaneClient,
  HostplaneError,
  type Operation,
  OperationFailedError,
} from '@hostplane/client';
import { createContext } from 'preact';
import { useContext, useRef, useState } from 'preact/hooks';

/** What a page uses to reach the API: the generated client, and `run` around every call. */
export interface Api {
  client: HostplaneClient;
  /**
   * Runs one call of the client. A 401 signs the person out (back to sign-in). A 503 or no answer
   * shows the retry banner and resolves once a retry succeeds: the page stays as it is meanwhile,
   * with everything typed. Any other error (field errors, 404, 409) is thrown to the page.
   */
  run<T>(action: () => Promise<T>): Promise<T>;
}

export const ApiContext = createContext<Api | null>(null);

export function useApi(): Api {
  const api = useContext(ApiContext);
  if (!api) throw new Error('useApi outside a signed-in page');
  return api;
}

export interface Banner {
  message: string;
  retry: () => void;
}

/** Builds `run` for a client, with what to do on a 401 and how to show the banner. */
export function makeApi(
  client: HostplaneClient,
  onUnauthenticated: () => void,
  showBanner: (banner: Banner | null) => void,
): Api {
  const run = <T,>(action: () => Promise<T>): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      const attempt = () => {
        action().then(
          (value) => {
            showBanner(null);
            resolve(value);
          },
          (error: unknown) => {
            if (error instanceof HostplaneError && error.kind === 'unauthenticated') {
              showBanner(null);
              onUnauthenticated();
              return; // the page is left for sign-in: this call never settles
            }
            if (error instanceof HostplaneError && error.kind === 'unavailable') {
              showBanner({
                message: 'Hostplane is not answering right now. Nothing you typed is lost.',
                retry: attempt,
              });
              return;
            }
            reject(error);
          },
        );
      };
      attempt();
    });
  return { client, run };
}

/** A sentence for an error a page shows (the API's own message when it gave one). */
export function messageOf(error: unknown): string {
  if (error instanceof Error) return error.message;
  return String(error);
}

/** The API's field errors by field name (`errors[]` of a 400 or 422), and the rest as one message. */
export function fieldErrorsOf(error: unknown): { fields: Record<string, string>; message: string } {
  const list = (error as { fieldErrors?: { field: string; message: string }[] }).fieldErrors ?? [];
  const fields: Record<string, string> = {};
  for (const e of list) fields[e.field] ??= e.message;
  return { fields, message: messageOf(error) };
}

/**
 * The field names an API error names, and what a form shows them under: `tags[1]` is also `tags`,
 * `user.email` is also `email` (the first message for a field wins).
 */
export function fieldKeys(field: string): string[] {
  const base = field.replace(/\[\d+\].*$/, '');
  const last = base.split('.').pop() ?? base;
  return [field, base, last];
}

export interface Submit<A> {
  /** The form's onSubmit: prevents the navigation and runs the action (one run at a time). */
  submit: (e?: Event) => Promise<void>;
  /** Runs the action on one thing (a row's button): the same lifecycle. */
  run: (arg: A) => Promise<void>;
  busy: boolean;
  /** The API's field errors by field name (see fieldKeys). */
  errors: Record<string, string>;
  /** The error that belongs to no field (or a summary when there are field errors). */
  message: string | null;
}

/**
 * The submit lifecycle every form of the console shares: busy while it runs, the API's field errors
 * beside their fields, the other errors as one message. A 401 (back to sign-in) and a 503 (the retry
 * banner, with the form and what was typed left as they are) are handled by `api.run` around the
 * action's calls. An operation that fails is a message: `failed` names it ("The backup failed: ...").
 */
export function useSubmit<A = undefined>(
  action: (api: Api, arg: A) => Promise<unknown>,
  options: { failed?: string; summary?: string } = {},
): Submit<A> {
  const api = useApi();
  const [busy, setBusy] = useState(false);
  const [errors, setErrors] = useState<Record<string, string>>({});
  const [message, setMessage] = useState<string | null>(null);
  const running = useRef(false);
  const run = async (arg: A) => {
    if (running.current) return;
    running.current = true;
    setBusy(true);
    setErrors({});
    setMessage(null);
    try {
      await action(api, arg);
    } catch (err) {
      if (err instanceof OperationFailedError) {
        setMessage(`${options.failed ?? 'The operation failed'}: ${err.message}`);
        return;
      }
      const { fields, message: text } = fieldErrorsOf(err);
      const shown: Record<string, string> = {};
      for (const [field, m] of Object.entries(fields)) for (const key of fieldKeys(field)) shown[key] ??= m;
      setErrors(shown);
      setMessage(
        Object.keys(fields).length > 0
          ? (options.summary ?? 'Nothing was saved: see the fields below.')
          : text,
      );
    } finally {
      running.current = false;
      setBusy(false);
    }
  };
  const submit = (e?: Event) => {
    e?.preventDefault();
    return run(undefined as A);
  };
  return { submit, run, busy, errors, message };
}

/**
 * Follows an operation (the `Location` of a 202, or its id): polls it with back-off (300 ms doubling
 * to 2 s) through `api.run`, showing each state, and resolves when it is completed (rejects with
 * OperationFailedError when it failed).
 */
export function useOperation(): {
  operation: Operation | null;
  follow: (api: Api, location: string) => Promise<Operation>;
} {
  const [operation, setOperation] = useState<Operation | null>(null);
  const follow = (api: Api, location: string) => {
    setOperation(null);
    return api.run(() =>
      api.client.waitForOperation(location, {
        intervalMs: 300,
        maxIntervalMs: 2000,
        onProgress: setOperation,
      }),
    );
  };
  return { operation, follow };
}
