import { type HostplaneClient, HostplaneError } from '@hostplane/client';
import { createContext } from 'preact';
import { useContext } from 'preact/hooks';

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
