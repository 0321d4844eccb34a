import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { serverBlock } from './webserver.js';

const block = {
  slug: `hp_${'a'.repeat(32)}`,
  names: ['site.test', 'shop.example', 'bare.example'],
  documentRoot: '/srv/hp/public',
  socket: '/srv/hp/run/php.sock',
  challenges: '/srv/hp/acme-challenge',
  tls: [{ names: ['shop.example'], certificate: '/srv/hp/tls/x.crt', key: '/srv/hp/tls/x.key' }],
};
const paths = { logs: '/srv/web/logs', cache: '/srv/web/cache', run: '/srv/web/run' };

/** Each `server { ... }` of the text with its listen line and names. */
const servers = (text: string) =>
  [...text.matchAll(/server \{\n {2}listen ([^;]+);\n {2}server_name ([^;]+);\n([\s\S]*?)\n\}\n/g)].map(
    (m) => ({
      listen: m[1],
      names: m[2],
      body: m[3] ?? '',
    }),
  );

describe('nginx server blocks: secure_all_urls (D2, issue 21)', () => {
  it('answers plain HTTP for a secure name with a 301 to https on the HTTPS port, challenges still served', () => {
    const text = serverBlock({ ...block, secure: ['shop.example'] }, { http: 8080, https: 8443 }, paths);
    const http = servers(text).filter((s) => s.listen === '8080');
    const site = http.find((s) => s.body.includes('root /srv/hp/public'));
    assert.equal(site?.names, 'site.test bare.example');
    const upgrade = http.find((s) => s.names === 'shop.example');
    assert.ok(upgrade, text);
    assert.match(upgrade.body, /location \^~ \/\.well-known\/acme-challenge\/ \{/);
    assert.match(upgrade.body, /return 301 https:\/\/\$host:8443\$request_uri;/);
    // Over HTTPS the secure name serves the site.
    const tls = servers(text).find((s) => s.listen === '8443 ssl');
    assert.equal(tls?.names, 'shop.example');
    assert.match(tls?.body ?? '', /root \/srv\/hp\/public/);
  });

  it('leaves out the port on 443, and serves every name over HTTP when none is secure', () => {
    const on443 = serverBlock({ ...block, secure: ['shop.example'] }, { http: 80, https: 443 }, paths);
    assert.match(on443, /return 301 https:\/\/\$host\$request_uri;/);
    const off = serverBlock(block, { http: 80, https: 443 }, paths);
    assert.equal(off.includes('https://$host'), false);
    assert.equal(servers(off).find((s) => s.listen === '80')?.names, 'site.test shop.example bare.example');
  });
});

describe('nginx server blocks: the page cache (issue 29 defect 1)', () => {
  it('keys pages by scheme, host, port and the routing generation, keeps 200s only and never an answer with a Location', () => {
    const text = serverBlock(
      { ...block, cacheGeneration: '0f1e2d3c4b5a6978' },
      { http: 8080, https: 8443 },
      paths,
    );
    assert.match(
      text,
      /fastcgi_cache_key "\$scheme:\/\/\$host:\$server_port\$request_uri \$request_method 0f1e2d3c4b5a6978";/,
    );
    assert.match(text, /fastcgi_cache_valid 200 10m;/);
    assert.doesNotMatch(text, /fastcgi_cache_valid[^;]*30[12]/);
    assert.match(text, /fastcgi_no_cache \$hp_skip_cache \$upstream_http_location;/);
    // A new generation is a new key: nothing cached under the old one is answered.
    const next = serverBlock({ ...block, cacheGeneration: 'aa' }, { http: 8080, https: 8443 }, paths);
    assert.doesNotMatch(next, /0f1e2d3c4b5a6978/);
    assert.throws(() =>
      serverBlock({ ...block, cacheGeneration: 'x"; evil' }, { http: 8080, https: 8443 }, paths),
    );
  });
});

describe('nginx server blocks: a moved install passed on (issue 30, decision 241)', () => {
  it("passes every request for the install's names to the new server on the same scheme and port, the name by SNI over HTTPS; no PHP, page cache or challenge served here", () => {
    const text = serverBlock({ ...block, forward: '10.9.8.7' }, { http: 8080, https: 8443 }, paths);
    const http = servers(text).find((s) => s.listen === '8080');
    assert.equal(http?.names, 'site.test shop.example bare.example');
    assert.match(http?.body ?? '', /proxy_pass http:\/\/10\.9\.8\.7:8080;/);
    assert.match(http?.body ?? '', /proxy_set_header Host \$http_host;/);
    const tls = servers(text).find((s) => s.listen === '8443 ssl');
    assert.equal(tls?.names, 'shop.example');
    assert.match(tls?.body ?? '', /proxy_pass https:\/\/10\.9\.8\.7:8443;/);
    assert.match(tls?.body ?? '', /proxy_ssl_server_name on;\n {4}proxy_ssl_name \$host;/);
    for (const absent of ['fastcgi_pass', 'fastcgi_cache hp_', 'acme-challenge', 'root /srv/hp/public'])
      assert.equal(text.includes(absent), false, `${absent} in ${text}`);
    const v6 = serverBlock({ ...block, forward: '2001:db8::7' }, { http: 80, https: 443 }, paths);
    assert.match(v6, /proxy_pass http:\/\/\[2001:db8::7\]:80;/);
  });

  it('refuses anything but an IP address to pass requests to', () => {
    for (const forward of ['example.com', '10.0.0.1; include /etc/passwd', '10.0.0.1:80', ''])
      assert.throws(
        () => serverBlock({ ...block, forward }, { http: 80, https: 443 }, paths),
        /not an address/,
      );
  });
});

describe('nginx server blocks: a move freezes writes without a reload (issue 30, decisions 211 and 245)', () => {
  it("tests the install's flag file at each request: frozen or not, the blocks' text is the same (nothing to reload)", () => {
    const frozen = serverBlock({ ...block, frozen: true }, { http: 80, https: 443 }, paths);
    assert.equal(frozen, serverBlock({ ...block, frozen: false }, { http: 80, https: 443 }, paths));
    const site = servers(frozen).find((s) => s.listen === '80');
    assert.match(site?.body ?? '', new RegExp(`if \\(-f /srv/web/run/${block.slug}\\.frozen\\) \\{`));
    assert.match(site?.body ?? '', /if \(\$hp_frozen = "fw"\) \{\n {4}return 503;/);
    assert.match(site?.body ?? '', /add_header Retry-After 30 always;/);
  });
});
