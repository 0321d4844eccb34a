import { randomBytes } from 'node:crypto';
import { after } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import { type App, buildApp } from '../../src/app.js';
import type { Clock } from '../../src/clock.js';
import { loadConfig } from '../../src/config.js';
import type { Database } from '../../src/db/client.js';
import { cloneDatabase } from './databases.js';

// biome-ignore lint/suspicious/noExplicitAny: response bodies are arbitrary JSON, asserted field by field.
export type Json = any;

export interface Res {
  status: number;
  body: Json;
  headers: LightMyRequestResponse['headers'];
  raw: LightMyRequestResponse;
}

export type Method = 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE';

export interface Client {
  request(method: Method, url: string, body?: unknown, headers?: Record<string, string>): Promise<Res>;
  get(url: string): Promise<Res>;
  post(url: string, body?: unknown): Promise<Res>;
  patch(url: string, body?: unknown): Promise<Res>;
  put(url: string, body?: unknown): Promise<Res>;
  delete(url: string): Promise<Res>;
}

export const ADMIN_TOKEN = 'test-admin-token-0123456789';
/** HOSTPLANE_SECRET_KEY of the tests (a file may pass its own through `env`). */
export const SECRET_KEY = 'test-secret-key-0123456789abcdefghijklmnop';

/** A clock the tests move by hand. */
export function testClock(start = new Date()): Clock & { advance(ms: number): void; set(d: Date): void } {
  let now = start.getTime();
  return {
    now: () => new Date(now),
    advance: (ms) => {
      now += ms;
    },
    set: (d) => {
      now = d.getTime();
    },
  };
}

function toRes(raw: LightMyRequestResponse): Res {
  let body: Json = null;
  if (raw.body.length > 0) {
    try {
      body = JSON.parse(raw.body);
    } catch {
      body = raw.body;
    }
  }
  return { status: raw.statusCode, body, headers: raw.headers, raw };
}

/** A client that sends the given Authorization header (or none) through app.inject. */
export function clientFor(app: App, authorization?: string): Client {
  const request = async (
    method: Method,
    url: string,
    body?: unknown,
    headers: Record<string, string> = {},
  ) => {
    const raw = await app.inject({
      method,
      url,
      headers: { ...(authorization && { authorization }), ...headers },
      ...(body !== undefined && { payload: body as object }),
    });
    return toRes(raw);
  };
  return {
    request,
    get: (url) => request('GET', url),
    post: (url, body) => request('POST', url, body),
    patch: (url, body) => request('PATCH', url, body),
    put: (url, body) => request('PUT', url, body),
    delete: (url) => request('DELETE', url),
  };
}

export const basic = (username: string, password: string) =>
  `Basic ${Buffer.from(`${username}:${password}`).toString('base64')}`;

export const uniqueName = (prefix = 'i') => `${prefix}${randomBytes(5).toString('hex')}`;

export interface TestApp {
  app: App;
  database: Database;
  /** Set on PostgreSQL: the URL of this file's database. */
  databaseUrl?: string;
  clock: ReturnType<typeof testClock>;
  admin: Client;
  anonymous: Client;
  close(): Promise<void>;
}

export interface TestAppOptions {
  env?: Record<string, string>;
}

/**
 * Builds the app on a fresh clone of the migrated template database. Closed automatically after the
 * test file (the node:test `after` hook): call it at the top level of the file (top-level await).
 */
export async function buildTestApp(options: TestAppOptions = {}): Promise<TestApp> {
  const cloned = await cloneDatabase();
  const config = loadConfig({
    DATA_DIR: '.tmp/data-unused',
    RATE_LIMIT_PER_MINUTE: '0',
    HOSTPLANE_ADMIN_TOKEN: ADMIN_TOKEN,
    HOSTPLANE_SECRET_KEY: SECRET_KEY,
    ...options.env,
  });
  const clock = testClock();
  const app = await buildApp({
    config,
    database: cloned.database,
    clock,
    adminToken: ADMIN_TOKEN,
    secretKey: config.secretKey ?? SECRET_KEY,
    logger: false,
  });
  await app.ready();
  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    await app.close();
    await cloned.drop();
  };
  after(close);
  return {
    app,
    database: cloned.database,
    ...(cloned.url && { databaseUrl: cloned.url }),
    clock,
    admin: clientFor(app, `Bearer ${ADMIN_TOKEN}`),
    anonymous: clientFor(app),
    close,
  };
}
