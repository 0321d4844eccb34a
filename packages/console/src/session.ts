import { createHostplaneClient, type HostplaneClient } from '@hostplane/client';

/** The API credential of this tab: sessionStorage only (never a URL, a cookie or a log). */
export interface Credential {
  username: string;
  password: string;
}

const KEY = 'hostplane.credential';

export function loadCredential(): Credential | null {
  try {
    const raw = sessionStorage.getItem(KEY);
    if (!raw) return null;
    const value = JSON.parse(raw) as Partial<Credential>;
    return typeof value.username === 'string' && typeof value.password === 'string'
      ? { username: value.username, password: value.password }
      : null;
  } catch {
    return null;
  }
}

export function saveCredential(credential: Credential): void {
  sessionStorage.setItem(KEY, JSON.stringify(credential));
}

export function clearCredential(): void {
  sessionStorage.removeItem(KEY);
}

/** The generated client on this origin's API, signed with the credential. */
export function clientFor(credential: Credential): HostplaneClient {
  return createHostplaneClient({ baseUrl: location.origin, ...credential });
}
