import { useEffect, useState } from 'preact/hooks';

/** Hash routes (`#/accounts/<id>`): the server serves one page; nothing secret is ever in them. */
export type Route =
  | { page: 'sign-in' }
  | { page: 'accounts' }
  | { page: 'account'; accountId: string }
  | { page: 'new-site'; accountId: string }
  | { page: 'users'; accountId: string }
  | { page: 'usage'; accountId: string }
  | { page: 'site'; siteId: string }
  | { page: 'install'; installId: string }
  | { page: 'ssh-keys' };

export function parseRoute(hash: string): Route {
  const parts = hash.replace(/^#\/?/, '').split('/').filter(Boolean).map(decodeURIComponent);
  const [first, id, sub] = parts;
  if (first === 'accounts' && id && sub === 'new-site') return { page: 'new-site', accountId: id };
  if (first === 'accounts' && id && sub === 'users') return { page: 'users', accountId: id };
  if (first === 'accounts' && id && sub === 'usage') return { page: 'usage', accountId: id };
  if (first === 'accounts' && id) return { page: 'account', accountId: id };
  if (first === 'sites' && id) return { page: 'site', siteId: id };
  if (first === 'installs' && id) return { page: 'install', installId: id };
  if (first === 'ssh-keys') return { page: 'ssh-keys' };
  if (first === 'sign-in') return { page: 'sign-in' };
  return { page: 'accounts' };
}

export const href = {
  accounts: () => '#/accounts',
  account: (id: string) => `#/accounts/${encodeURIComponent(id)}`,
  newSite: (accountId: string) => `#/accounts/${encodeURIComponent(accountId)}/new-site`,
  users: (accountId: string) => `#/accounts/${encodeURIComponent(accountId)}/users`,
  usage: (accountId: string) => `#/accounts/${encodeURIComponent(accountId)}/usage`,
  site: (id: string) => `#/sites/${encodeURIComponent(id)}`,
  install: (id: string) => `#/installs/${encodeURIComponent(id)}`,
  sshKeys: () => '#/ssh-keys',
  signIn: () => '#/sign-in',
};

export function navigate(to: string): void {
  if (location.hash !== to) location.hash = to;
}

export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(location.hash));
  useEffect(() => {
    const onChange = () => setRoute(parseRoute(location.hash));
    addEventListener('hashchange', onChange);
    return () => removeEventListener('hashchange', onChange);
  }, []);
  return route;
}
