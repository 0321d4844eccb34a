// Preloaded into every API test file's process by test/support/run-files.ts (`--import`), before
// any application module: src/auth/passwords.ts takes `scrypt` from node:crypto when it loads.
//
// Production-cost scrypt (N=2^15: ~110 ms of CPU here) was a third or more of the suite's CPU: a
// test file made a hash per credential it created, and hashed each credential again at every cache
// miss (every membership change clears the credential cache, every clock move past
// AUTH_CACHE_SECONDS expires it). Here, a key derived when a salt is first seen (a new credential,
// hashPassword) is remembered, and a later derivation with the same password, salt and parameters
// (a verification of the right password) answers it without deriving it again: the same bytes scrypt
// gives, so every hash stored is a real one at production cost, and credentials still work across
// processes (the CLI and the servers the process tests start hash at full cost themselves).
// What is never remembered: a derivation with a salt already seen, so every wrong password (and every
// unknown username, checked against the dummy hash) costs a real hash, as it does in production.
// Every call still goes through scrypt's callback, asynchronously, so call counts and ordering
// are unchanged. A file that needs every verification to cost a full hash (e.g. hashing
// under load) calls `realPasswordHashes()` at its top.
import { createHash } from 'node:crypto';
import { createRequire, syncBuiltinESMExports } from 'node:module';

type ScryptCallback = (err: Error | null, key: Buffer) => void;

const require = createRequire(import.meta.url);
const crypto = require('node:crypto') as typeof import('node:crypto');
const STATE = Symbol.for('hostplane.test.passwordHashes');
interface State {
  remember: boolean;
  derived: Map<string, Buffer>;
  salts: Set<string>;
  /** Derivations asked for, and the ones answered from memory (for tests of this file). */
  calls: number;
  remembered: number;
}
const globalState = globalThis as unknown as Record<symbol, State | undefined>;

/** Every later verification in this process derives its key at full cost (the default in production). */
export function realPasswordHashes(): void {
  const state = globalState[STATE];
  if (state) state.remember = false;
}

/** How many scrypt derivations were asked for in this process, and how many came from memory. */
export function passwordHashCounts(): { calls: number; remembered: number } {
  const state = globalState[STATE];
  return { calls: state?.calls ?? 0, remembered: state?.remembered ?? 0 };
}

if (!globalState[STATE]) {
  const state: State = { remember: true, derived: new Map(), salts: new Set(), calls: 0, remembered: 0 };
  globalState[STATE] = state;
  const scrypt = crypto.scrypt;
  const text = (v: unknown) =>
    typeof v === 'string' ? `s:${v}` : `b:${Buffer.from(v as Uint8Array).toString('base64')}`;
  const patched = (
    password: unknown,
    salt: unknown,
    keylen: number,
    options: object | ScryptCallback,
    callback?: ScryptCallback,
  ) => {
    const cb = (typeof options === 'function' ? options : callback) as ScryptCallback;
    const opts = typeof options === 'function' ? {} : options;
    state.calls++;
    const saltText = text(salt);
    const o = opts as Record<string, unknown>;
    const cost = `${o.N ?? o.cost}/${o.r ?? o.blockSize}/${o.p ?? o.parallelization}`;
    const key = createHash('sha256')
      .update(`${text(password)}\0${saltText}\0${keylen}\0${cost}`)
      .digest('base64');
    const known = state.remember ? state.derived.get(key) : undefined;
    if (known) {
      state.remembered++;
      const copy = Buffer.from(known);
      setImmediate(() => cb(null, copy));
      return;
    }
    const firstUse = !state.salts.has(saltText);
    state.salts.add(saltText);
    // biome-ignore lint/suspicious/noExplicitAny: node:crypto's scrypt overloads, called as given.
    (scrypt as any)(password, salt, keylen, opts, (err: Error | null, derived: Buffer) => {
      if (!err && firstUse) state.derived.set(key, Buffer.from(derived));
      cb(err, derived);
    });
  };
  crypto.scrypt = patched as typeof crypto.scrypt;
  syncBuiltinESMExports();
}
