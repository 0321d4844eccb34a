import createClient, { type Client, type FetchResponse, type MaybeOptionalInit } from 'openapi-fetch';
import type { HttpMethod, MediaType, PathsWithMethod, RequiredKeysOf } from 'openapi-typescript-helpers';
import { apiError, ConnectionError, HostplaneError, OperationFailedError } from './errors.js';
import type { components, operations, paths } from './schema.generated.js';

export type { components, operations, paths };

/** The asynchronous operation record (GET /v1/operations/{id}). */
export type Operation = operations['getOperation']['responses'][200]['content']['application/json'];

export interface HostplaneClientOptions {
  /** Where Hostplane serves, e.g. `https://hosting.example.com` (with or without a trailing `/`). */
  baseUrl: string;
  /** An API credential (Basic auth). */
  username: string;
  password: string;
  /** Default: the global fetch. */
  fetch?: typeof globalThis.fetch;
}

// openapi-fetch's own parameter shape (not exported by it): the init argument is optional only when
// the operation has no required parameter or body.
type InitParam<Init> =
  RequiredKeysOf<Init> extends never
    ? [(Init & { [key: string]: unknown })?]
    : [Init & { [key: string]: unknown }];
type Data<P, M extends HttpMethod, Init> =
  P extends Record<M, Record<string | number, unknown>>
    ? NonNullable<FetchResponse<P[M], Init, MediaType>['data']>
    : never;

/** The answer to a write: its body, its status, and `Location` (the operation URL of a 202). */
export interface WriteResult<T> {
  data: T;
  status: number;
  location: string | null;
}

type Read = <P extends PathsWithMethod<paths, 'get'>, I extends MaybeOptionalInit<paths[P], 'get'>>(
  path: P,
  ...init: InitParam<I>
) => Promise<Data<paths[P], 'get', I>>;
type Write<M extends 'post' | 'put' | 'patch' | 'delete'> = <
  P extends PathsWithMethod<paths, M>,
  I extends MaybeOptionalInit<paths[P], M>,
>(
  path: P,
  ...init: InitParam<I>
) => Promise<WriteResult<Data<paths[P], M, I>>>;

export interface WaitOptions {
  /** Called after every poll with the operation as it is now. */
  onProgress?: (operation: Operation) => void;
  /** First delay between polls (ms, default 250); it doubles up to `maxIntervalMs`. */
  intervalMs?: number;
  /** Longest delay between polls (ms, default 5000). */
  maxIntervalMs?: number;
  /** Give up after this long (ms, default 10 minutes) with a HostplaneError of kind `unavailable`. */
  timeoutMs?: number;
  signal?: AbortSignal;
}

export interface HostplaneClient {
  /** The generated openapi-fetch client: every path and method of the API, typed; errors are thrown. */
  readonly api: Client<paths>;
  readonly baseUrl: string;
  get: Read;
  post: Write<'post'>;
  put: Write<'put'>;
  patch: Write<'patch'>;
  delete: Write<'delete'>;
  /** Every page of a list (G6 envelope), following `offset` until `count` is reached. */
  listAll<T>(
    fetchPage: (page: { limit: number; offset: number }) => Promise<{ count: number; results: T[] }>,
    limit?: number,
  ): Promise<T[]>;
  /**
   * Polls an operation (its id, or the URL from a 202's `Location`) with back-off until it is
   * `completed` (resolves with it) or `failed` (rejects with OperationFailedError).
   */
  waitForOperation(idOrUrl: string, options?: WaitOptions): Promise<Operation>;
}

/** The operation id of an operation URL (`.../v1/operations/<id>`) or of an id. */
export function operationId(idOrUrl: string): string {
  const match = idOrUrl.match(/operations\/([^/?#]+)/);
  return match?.[1] ?? idOrUrl;
}

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        reject(signal.reason);
      },
      { once: true },
    );
  });

/**
 * A typed Hostplane client: Basic auth on every request, and every error answer thrown as a typed
 * error (UnauthenticatedError, NotFoundError, ValidationError with `fieldErrors`, ...).
 */
export function createHostplaneClient(options: HostplaneClientOptions): HostplaneClient {
  const baseUrl = options.baseUrl.replace(/\/+$/, '');
  const authorization = `Basic ${Buffer.from(`${options.username}:${options.password}`).toString('base64')}`;
  const api = createClient<paths>({
    baseUrl,
    headers: { authorization, accept: 'application/json' },
    ...(options.fetch && { fetch: options.fetch }),
  });
  api.use({
    async onResponse({ request, response }) {
      if (response.ok) return undefined;
      const text = await response.clone().text();
      let body: unknown = text;
      try {
        body = text ? JSON.parse(text) : null;
      } catch {
        // not JSON: the text is the message
      }
      const retryAfter = Number(response.headers.get('retry-after'));
      throw apiError(
        response.status,
        body,
        request.method,
        request.url,
        Number.isFinite(retryAfter) && retryAfter > 0 ? retryAfter : null,
      );
    },
    onError({ error, request }) {
      if (error instanceof HostplaneError) return error;
      return new ConnectionError(`Cannot reach ${request.url}: ${(error as Error).message ?? error}`, error);
    },
  });

  const call = async (method: HttpMethod, path: string, init: unknown) => {
    // biome-ignore lint/suspicious/noExplicitAny: the public signatures above carry the types
    const result = await (api.request as any)(method, path, init);
    return {
      data: result.data,
      status: result.response.status,
      location: result.response.headers.get('location'),
    };
  };
  const write = (method: 'post' | 'put' | 'patch' | 'delete') => (path: string, init?: unknown) =>
    call(method, path, init);

  const client: HostplaneClient = {
    api,
    baseUrl,
    get: (async (path: string, init?: unknown) => (await call('get', path, init)).data) as Read,
    post: write('post') as Write<'post'>,
    put: write('put') as Write<'put'>,
    patch: write('patch') as Write<'patch'>,
    delete: write('delete') as Write<'delete'>,
    async listAll(fetchPage, limit = 100) {
      const all = [];
      for (let offset = 0; ; offset += limit) {
        const page = await fetchPage({ limit, offset });
        all.push(...page.results);
        if (page.results.length === 0 || offset + limit >= page.count) return all;
      }
    },
    async waitForOperation(idOrUrl, wait = {}) {
      const id = operationId(idOrUrl);
      const deadline = Date.now() + (wait.timeoutMs ?? 600_000);
      let delay = wait.intervalMs ?? 250;
      for (;;) {
        const operation = await client.get('/v1/operations/{operation_id}', {
          params: { path: { operation_id: id } },
          ...(wait.signal && { signal: wait.signal }),
        });
        wait.onProgress?.(operation);
        if (operation.status === 'completed') return operation;
        if (operation.status === 'failed') throw new OperationFailedError(operation);
        if (Date.now() + delay > deadline) {
          throw new HostplaneError(
            `Operation ${id} is still ${operation.status}: gave up waiting`,
            'unavailable',
          );
        }
        await sleep(delay, wait.signal);
        delay = Math.min(delay * 2, wait.maxIntervalMs ?? 5000);
      }
    },
  };
  return client;
}
