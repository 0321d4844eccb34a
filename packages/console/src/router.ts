import { useEffect, useState } from 'preact/hooks';

/** Hash routes (`#/accounts/<id>`): the server serves one page; nothing secret is ever in them. */
export type Route =
  | { page: 'sign-in' }
  | { page: 'accounts' }
  | { page: 'account'; accountId: string }
  | { page: 'new-site'; accountId: string }
  | { page: 'install'; installId: string };

export function parseRoute(hash: string): Route {
  const parts = hash.replace(/^#\/?/, '').split('/').filter(Boolean).map(decodeURIComponent);
  const [first, id, sub] = parts;
  if (first === 'accounts' && id && sub === 'new-site') return { page: 'new-site', accountId: id };
  if (first === 'accounts' && id) return { page: 'account', accountId: id };
  if (first === 'installs' && id) return { page: 'install', installId: id };
  if (first === 'sign-in') return { page: 'sign-in' };
  return { page: 'accounts' };
}

export const href = {
  accounts: () => '#/accounts',
  account: (id: string) => `#/accounts/${encodeURIComponent(id)}`,
  newSite: (accountId: string) => `#/accounts/${encodeURIComponent(accountId)}/new-site`,
  install: (id: string) => `#/installs/${encodeURIComponent(id)}`,
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
