import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import Fastify from 'fastify';
import type { RouteContext } from '../../route-context.js';
import { consoleRoutes } from './console.routes.js';

async function appOn(consoleDir: string) {
  const app = Fastify();
  await app.register(consoleRoutes({ config: { consoleDir } } as unknown as RouteContext));
  await app.ready();
  after(() => app.close());
  return app;
}

describe('issue 23: the console routes', () => {
  it('a missing build answers 404 with how to build it, and the app still starts', async () => {
    const app = await appOn(path.join(os.tmpdir(), 'hostplane-no-console-here'));
    const res = await app.inject({ method: 'GET', url: '/console/' });
    assert.equal(res.statusCode, 404);
    assert.match(res.json().message, /web console is not built.*npm ci/);
    const asset = await app.inject({ method: 'GET', url: '/console/assets/index.js' });
    assert.equal(asset.statusCode, 404);
  });

  it('serves the build at /console/ with its CSP; /console redirects; no path escapes the folder', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hostplane-console-build-'));
    after(() => fs.rmSync(dir, { recursive: true, force: true }));
    fs.mkdirSync(path.join(dir, 'assets'));
    fs.writeFileSync(path.join(dir, 'index.html'), '<!doctype html><title>console</title>');
    fs.writeFileSync(path.join(dir, 'assets', 'index-abc.js'), 'console.log(1)');
    fs.writeFileSync(
      path.join(dir, '..', 'hostplane-console-secret.txt'),
      'the content of a file beside the build',
    );
    after(() => fs.rmSync(path.join(dir, '..', 'hostplane-console-secret.txt'), { force: true }));
    const app = await appOn(dir);

    const page = await app.inject({ method: 'GET', url: '/console/' });
    assert.equal(page.statusCode, 200);
    assert.match(page.body, /<title>console<\/title>/);
    assert.match(String(page.headers['content-security-policy']), /script-src 'self'/);
    assert.equal(page.headers['cache-control'], 'no-cache');
    const asset = await app.inject({ method: 'GET', url: '/console/assets/index-abc.js' });
    assert.equal(asset.statusCode, 200);
    assert.match(String(asset.headers['cache-control']), /immutable/);
    const bare = await app.inject({ method: 'GET', url: '/console' });
    assert.equal(bare.statusCode, 301);
    assert.equal(bare.headers.location, '/console/');
    for (const url of [
      '/console/../hostplane-console-secret.txt',
      '/console/%2e%2e/hostplane-console-secret.txt',
    ]) {
      const escaped = await app.inject({ method: 'GET', url });
      assert.notEqual(escaped.statusCode, 200, url);
      assert.ok(!escaped.body.includes('beside the build'), url);
    }
  });
});
