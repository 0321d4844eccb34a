import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CliError, EXIT } from './exit-codes.js';

export interface Profile {
  url: string;
  username: string;
  password: string;
}

/** The environment the CLI reads (passed in: tests run it with their own). */
export type Env = Record<string, string | undefined>;

/**
 * The profile file: `HOSTPLANE_PROFILES_FILE`, else `$XDG_CONFIG_HOME/hostplane/profiles.json`, else
 * `~/.config/hostplane/profiles.json`. A JSON object of named profiles: `{"default": {"url", "username",
 * "password"}, "staging": {...}}`.
 */
export function profilesFile(env: Env): string {
  if (env.HOSTPLANE_PROFILES_FILE) return env.HOSTPLANE_PROFILES_FILE;
  const config = env.XDG_CONFIG_HOME || path.join(env.HOME || os.homedir(), '.config');
  return path.join(config, 'hostplane', 'profiles.json');
}

/** Reads the profile file, refusing it when group or others may read or write it (it holds passwords). */
export function readProfiles(file: string): Record<string, Partial<Profile>> {
  let stat: fs.Stats;
  try {
    stat = fs.statSync(file);
  } catch {
    return {};
  }
  const mode = stat.mode & 0o777;
  if ((mode & 0o077) !== 0) {
    throw new CliError(
      `Refusing the profile file ${file}: its mode is ${mode.toString(8).padStart(4, '0')}, and it holds passwords. ` +
        `Make it private with: chmod 600 ${file}`,
      EXIT.profileFile,
    );
  }
  try {
    const parsed: unknown = JSON.parse(fs.readFileSync(file, 'utf8'));
    if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) throw new Error('not a JSON object');
    return parsed as Record<string, Partial<Profile>>;
  } catch (error) {
    throw new CliError(`Cannot read the profile file ${file}: ${(error as Error).message}`, EXIT.profileFile);
  }
}

/** Writes (or replaces) one profile, creating the file with mode 0600. */
export function saveProfile(file: string, name: string, profile: Profile): void {
  const profiles = readProfiles(file);
  profiles[name] = profile;
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  fs.writeFileSync(file, `${JSON.stringify(profiles, null, 2)}\n`, { mode: 0o600 });
  fs.chmodSync(file, 0o600);
}

/**
 * The credential to use: a named profile (`--profile` or HOSTPLANE_PROFILE; else `default` when the file
 * has one), each field overridden by HOSTPLANE_URL, HOSTPLANE_USERNAME and HOSTPLANE_PASSWORD.
 */
export function resolveProfile(env: Env, profileName: string | undefined): Profile {
  const name = profileName ?? env.HOSTPLANE_PROFILE;
  const fromEnv = {
    url: env.HOSTPLANE_URL,
    username: env.HOSTPLANE_USERNAME,
    password: env.HOSTPLANE_PASSWORD,
  };
  const envComplete = Boolean(fromEnv.url && fromEnv.username && fromEnv.password);
  let base: Partial<Profile> = {};
  if (name || !envComplete) {
    const file = profilesFile(env);
    const profiles = readProfiles(file);
    const chosen = profiles[name ?? 'default'];
    if (name && !chosen) {
      throw new CliError(`No profile named "${name}" in ${file}`, EXIT.usage);
    }
    base = chosen ?? {};
  }
  const url = fromEnv.url || base.url;
  const username = fromEnv.username || base.username;
  const password = fromEnv.password || base.password;
  if (!url || !username || !password) {
    throw new CliError(
      'No credentials: set HOSTPLANE_URL, HOSTPLANE_USERNAME and HOSTPLANE_PASSWORD, or save a profile with ' +
        '`hostplane-cli profile set default --url URL --username NAME` (password from HOSTPLANE_PASSWORD or stdin)',
      EXIT.usage,
    );
  }
  return { url, username, password };
}
