import { render } from 'preact';
import { useEffect, useMemo, useState } from 'preact/hooks';
import { ApiContext, type Banner, makeApi } from './api.js';
import { AccountPage } from './pages/account.js';
import { AccountsPage } from './pages/accounts.js';
import { InstallPage } from './pages/install.js';
import { NewSitePage } from './pages/new-site.js';
import { SignInPage } from './pages/sign-in.js';
import { SitePage } from './pages/site.js';
import { SshKeysPage } from './pages/ssh-keys.js';
import { UsersPage } from './pages/users.js';
import { href, navigate, useRoute } from './router.js';
import { type Credential, clearCredential, clientFor, loadCredential, saveCredential } from './session.js';
import './style.css';
import { Loading } from './ui.js';

// The usage page carries the chart library: loaded only when it is opened (the first page's budget).
function LazyUsagePage(props: { accountId: string }) {
  const [page, setPage] = useState<typeof import('./pages/usage.js') | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    import('./pages/usage.js').then(setPage, (e: Error) => setError(e.message));
  }, []);
  if (error) return <p role="alert">The usage page could not be loaded: {error}</p>;
  return page ? <page.UsagePage accountId={props.accountId} /> : <Loading />;
}

function App() {
  const route = useRoute();
  const [credential, setCredential] = useState<Credential | null>(loadCredential);
  const [banner, setBanner] = useState<Banner | null>(null);
  const [notice, setNotice] = useState<string | null>(null);

  const api = useMemo(() => {
    if (!credential) return null;
    return makeApi(
      clientFor(credential),
      () => {
        clearCredential();
        setCredential(null);
        setNotice('Your credential was refused (401). Sign in again.');
      },
      setBanner,
    );
  }, [credential]);

  const signOut = () => {
    clearCredential();
    setCredential(null);
    setNotice('Signed out.');
    navigate(href.signIn());
  };

  if (!credential || !api || route.page === 'sign-in') {
    return (
      <Shell>
        <SignInPage
          notice={notice}
          onSignedIn={(c) => {
            saveCredential(c);
            setNotice(null);
            setCredential(c);
            if (route.page === 'sign-in') navigate(href.accounts());
          }}
        />
      </Shell>
    );
  }

  return (
    <ApiContext.Provider value={api}>
      <Shell user={credential.username} onSignOut={signOut}>
        {banner && (
          <div class="banner" role="alert">
            <span>{banner.message}</span>
            <button type="button" onClick={banner.retry}>
              Retry
            </button>
          </div>
        )}
        {route.page === 'accounts' && <AccountsPage />}
        {route.page === 'account' && <AccountPage accountId={route.accountId} key={route.accountId} />}
        {route.page === 'new-site' && <NewSitePage accountId={route.accountId} key={route.accountId} />}
        {route.page === 'site' && <SitePage siteId={route.siteId} key={route.siteId} />}
        {route.page === 'install' && <InstallPage installId={route.installId} key={route.installId} />}
        {route.page === 'users' && <UsersPage accountId={route.accountId} key={route.accountId} />}
        {route.page === 'usage' && <LazyUsagePage accountId={route.accountId} key={route.accountId} />}
        {route.page === 'ssh-keys' && <SshKeysPage />}
      </Shell>
    </ApiContext.Provider>
  );
}

function Shell(props: { children: preact.ComponentChildren; user?: string; onSignOut?: () => void }) {
  return (
    <>
      {/* A button, not a link: hash links are routes here. */}
      <button type="button" class="skip" onClick={() => document.getElementById('main')?.focus()}>
        Skip to content
      </button>
      <header class="top">
        <a class="brand" href={href.accounts()}>
          Hostplane
        </a>
        {props.user && (
          <nav aria-label="Account">
            <a href={href.sshKeys()}>SSH keys</a>
            <span class="who">{props.user}</span>
            <button type="button" class="link" onClick={props.onSignOut}>
              Sign out
            </button>
          </nav>
        )}
      </header>
      <main id="main" tabIndex={-1}>
        {props.children}
      </main>
    </>
  );
}

const root = document.getElementById('app');
if (root) render(<App />, root);
