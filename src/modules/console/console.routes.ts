import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import fastifyStatic from '@fastify/static';
import type { FastifyPluginAsync } from 'fastify';
import type { RouteContext } from '../../route-context.js';

/** Where `npm ci` builds the console (`vite build` of packages/console), found from this install. */
export const CONSOLE_BUILD_DIR = fileURLToPath(new URL('../../../packages/console/dist', import.meta.url));

/**
 * The console talks to this origin's API only (the generated client); nothing inline, no frames.
 * `style-src 'unsafe-inline'` is not needed: the build emits one stylesheet.
 */
const CONSOLE_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
  "form-action 'none'",
].join('; ');

/**
 * The web console (issue 23) at /console: the static files of its build, public (the console signs
 * in with an API credential of its own, kept in the tab's sessionStorage; no server-side session).
 * A missing build answers 404 saying how to build it, instead of failing to start.
 */
export function consoleRoutes(ctx: RouteContext): FastifyPluginAsync {
  const root = ctx.config.consoleDir ?? CONSOLE_BUILD_DIR;
  return async (app) => {
    app.get('/console', { schema: { hide: true } }, (_request, reply) => reply.redirect('/console/', 301));
    if (!fs.existsSync(path.join(root, 'index.html'))) {
      const missing = async () => ({
        message: `The web console is not built (no ${path.join(root, 'index.html')}): run \`npm ci\` or \`npm run build -w @hostplane/console\`.`,
      });
      app.get('/console/*', { schema: { hide: true } }, async (_request, reply) =>
        reply.code(404).send(await missing()),
      );
      return;
    }
    await app.register(fastifyStatic, {
      root,
      prefix: '/console/',
      index: 'index.html',
      wildcard: true,
      setHeaders(res, file) {
        res.header('content-security-policy', CONSOLE_CSP);
        res.header('x-content-type-options', 'nosniff');
        res.header('referrer-policy', 'no-referrer');
        // Hashed asset names never change; the page itself is always revalidated.
        res.header(
          'cache-control',
          file.includes(`${path.sep}assets${path.sep}`) ? 'public, max-age=31536000, immutable' : 'no-cache',
        );
      },
    });
  };
}
