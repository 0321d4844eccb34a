import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository root (packages/client/scripts/ -> ../../..). */
export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

/**
 * Test settings: fault injection on, short simulated durations, and failed job steps retried at once
 * (an injected fault must be given once per attempt: {@link ATTEMPTS_PER_STEP}).
 */
export const TEST_SERVER_ENV: Record<string, string> = {
  HOSTPLANE_FAULTS: 'on',
  SIMULATED_DURATIONS: 'provision=0,backup=1,restore=1,copy=1,purge_cache=0,move_site=1',
  JOB_RETRY_DELAY_SECONDS: '0',
  JOB_POLL_INTERVAL_MS: '200',
};

/** A job step's attempts (src/jobs/catalog.ts: retryLimit 3 of the operation steps, plus the first). */
export const ATTEMPTS_PER_STEP = 4;

export interface Hostplane {
  /** e.g. `http://127.0.0.1:41234` (no trailing slash, no /v1). */
  url: string;
  adminToken: string;
  /** The demo account's credential, made on the first start of an empty database. */
  demo: { username: string; password: string; accountId: string };
  output(): string;
  stop(): Promise<void>;
}

/**
 * Starts a throwaway Hostplane (`node bin/hostplane.js serve`, the README's run command) on an embedded
 * database in a temporary DATA_DIR and a free port, and resolves once it serves. Used by the client's
 * generator (no network: the OpenAPI document comes from this local process) and by the packages' tests.
 */
export async function startHostplane(env: Record<string, string> = {}): Promise<Hostplane> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'hostplane-pkg-'));
  const adminToken = `admin-${randomBytes(16).toString('hex')}`;
  const child: ChildProcess = spawn(process.execPath, [path.join(REPO_ROOT, 'bin/hostplane.js'), 'serve'], {
    cwd: REPO_ROOT,
    env: {
      PATH: process.env.PATH ?? '',
      LOG_LEVEL: 'warn',
      DATA_DIR: dataDir,
      PORT: '0',
      HOST: '127.0.0.1',
      HOSTPLANE_ADMIN_TOKEN: adminToken,
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let text = '';
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  const ready = new Promise<RegExpMatchArray>((resolve, reject) => {
    const pattern =
      /Hostplane is serving (\S+)\/v1[\s\S]*curl -u '([^:]+):([^']+)' '[^']*account_id=([0-9a-f-]+)'/;
    const timer = setTimeout(() => reject(new Error(`Hostplane did not start:\n${text}`)), 120_000);
    const onData = (chunk: Buffer) => {
      text += chunk.toString();
      const match = text.match(pattern);
      if (match) {
        clearTimeout(timer);
        resolve(match);
      }
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    void exited.then(() => {
      clearTimeout(timer);
      reject(new Error(`Hostplane exited before serving:\n${text}`));
    });
  });
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await exited;
    fs.rmSync(dataDir, { recursive: true, force: true });
  };
  try {
    const [, url, username, password, accountId] = await ready;
    return {
      url: url ?? '',
      adminToken,
      demo: { username: username ?? '', password: password ?? '', accountId: accountId ?? '' },
      output: () => text,
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}
