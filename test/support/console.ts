import assert from 'node:assert/strict';
import fs from 'node:fs';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after } from 'node:test';
import { fileURLToPath } from 'node:url';
import { type BrowserContext, chromium, type Page } from 'playwright-core';
import { CONSOLE_BUILD_DIR } from '../../src/modules/console/console.routes.js';
import type { Member } from './factories.js';
import type { TestApp } from './harness.js';

// The web console's browser tests (issue 23): Debian's chromium driven by playwright-core against a
// real server on a loopback port; screenshots in test-artifacts/console/, axe-core on every page.
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
export const ARTIFACTS = path.resolve('test-artifacts/console');
const AXE_SOURCE = fs.readFileSync(fileURLToPath(import.meta.resolve('axe-core/axe.min.js')), 'utf8');
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];
export const PHONE = { width: 390, height: 844 };
export const DESKTOP = { width: 1100, height: 900 };

/** The page's globals, inside page.evaluate (the project's lib has no DOM types). */
export interface InPage {
  document: {
    cookie: string;
    scrollingElement: { scrollWidth: number } | null;
    querySelector(s: string): unknown;
    activeElement: unknown;
  };
  innerWidth: number;
  getComputedStyle(e: unknown): { fontFamily: string };
  sessionStorage: { length: number; setItem(key: string, value: string): void };
  localStorage: { length: number };
}
export const inPage = () => globalThis as unknown as InPage;

export interface ConsoleBrowser {
  base: string;
  context: BrowserContext;
  newPage(viewport?: { width: number; height: number }): Promise<Page>;
}

/**
 * Starts the app on a loopback port and one chromium for the file (closed after it). `args`: more
 * chromium switches (e.g. `--host-resolver-rules` to reach the local web tier's install names).
 */
export async function startConsoleBrowser(
  t: TestApp,
  options: { args?: string[] } = {},
): Promise<ConsoleBrowser> {
  assert.ok(fs.existsSync(CHROMIUM), `${CHROMIUM} is missing: scripts/test.sh installs Debian's chromium`);
  assert.ok(
    fs.existsSync(path.join(CONSOLE_BUILD_DIR, 'index.html')),
    'the console is not built: npm ci (or npm run build -w @hostplane/console)',
  );
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  const base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'hostplane-console-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [...CHROMIUM_ARGS, ...(options.args ?? [])],
    viewport: DESKTOP,
  });
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  after(async () => {
    await context.close();
    fs.rmSync(profile, { recursive: true, force: true });
  });
  return {
    base,
    context,
    async newPage(viewport = DESKTOP) {
      const page = await context.newPage();
      await page.setViewportSize(viewport);
      return page;
    },
  };
}

/** axe-core on the page as it is now: no serious or critical violation. */
export async function checkAccessibility(page: Page, what: string) {
  await page.evaluate(AXE_SOURCE);
  const violations = await page.evaluate(async () => {
    // biome-ignore lint/suspicious/noExplicitAny: axe is the injected global
    const axe = (globalThis as any).axe;
    const result = await axe.run((globalThis as unknown as InPage).document);
    return (
      result.violations as { id: string; impact: string; help: string; nodes: { target: string[] }[] }[]
    )
      .filter((v) => v.impact === 'serious' || v.impact === 'critical')
      .map((v) => `${v.impact} ${v.id}: ${v.help} at ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
  });
  assert.deepEqual(violations, [], `accessibility of ${what}`);
}

/** Nothing wider than the viewport: no horizontal scrolling (a phone, or 200% zoom). */
export async function checkNoHorizontalOverflow(page: Page, what: string) {
  const { scrollWidth, innerWidth, widest } = await page.evaluate(() => {
    const g = globalThis as unknown as InPage;
    // The elements that reach past the right edge (named in the failure message).
    // biome-ignore lint/suspicious/noExplicitAny: the page's DOM
    const all = [...(g.document as any).querySelectorAll('body *')] as any[];
    const widest = all
      .filter((e) => e.getBoundingClientRect().right > g.innerWidth + 0.5 && !e.closest('.table-scroll'))
      .slice(-3)
      .map(
        (e) => `${e.tagName.toLowerCase()}.${e.className} (${Math.round(e.getBoundingClientRect().right)})`,
      );
    return { scrollWidth: g.document.scrollingElement?.scrollWidth ?? 0, innerWidth: g.innerWidth, widest };
  });
  assert.ok(
    scrollWidth <= innerWidth,
    `${what}: scrollWidth ${scrollWidth} > innerWidth ${innerWidth}: ${widest.join(', ')}`,
  );
}

export async function keep(page: Page, name: string) {
  await page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`), fullPage: true });
}

export async function signIn(page: Page, base: string, member: Member) {
  await page.goto(`${base}/console/`);
  await page.getByRole('heading', { name: 'Sign in' }).waitFor();
  await checkAccessibility(page, 'the sign-in page');
  await page.getByLabel('Username').fill(member.username);
  await page.getByLabel('Password').fill(member.password);
  await page.getByLabel('Password').press('Enter');
  await page.getByRole('heading', { name: 'Accounts' }).waitFor();
}

/**
 * Watches the API requests (`/v1/...`) a page makes, to measure its request waterfall: a request is
 * one level deeper than the deepest request that had finished before it started.
 */
export function watchApiRequests(page: Page) {
  // Times as the events arrive from Chromium (in order: a request's start is announced when the page
  // calls fetch, before any later answer), not Request.timing() (-1 when a timing is missing).
  const started = new Map<unknown, number>();
  const done: { path: string; start: number; end: number }[] = [];
  page.on('request', (request) => started.set(request, performance.now()));
  page.on('requestfinished', (request) => {
    const url = new URL(request.url());
    const start = started.get(request);
    if (!url.pathname.startsWith('/v1/') || start === undefined) return;
    done.push({ path: url.pathname, start, end: performance.now() });
  });
  return {
    reset() {
      done.length = 0;
    },
    count: () => done.length,
    /** The longest chain of requests each started after the one before it ended. */
    depth(): number {
      const sorted = [...done].sort((a, b) => a.start - b.start);
      const depths: number[] = [];
      sorted.forEach((r, i) => {
        let deepest = 0;
        for (let j = 0; j < i; j++) {
          const before = sorted[j];
          if (before && before.end <= r.start) deepest = Math.max(deepest, depths[j] ?? 0);
        }
        depths.push(deepest + 1);
      });
      return Math.max(0, ...depths);
    },
  };
}

/** The page's first contentful paint (ms from navigation), from PerformanceObserver('paint'). */
export async function firstPaint(page: Page): Promise<number> {
  return page.evaluate(
    () =>
      new Promise<number>((resolve) => {
        // biome-ignore lint/suspicious/noExplicitAny: the browser's PerformanceObserver
        const Observer = (globalThis as any).PerformanceObserver;
        new Observer((list: { getEntries(): { name: string; startTime: number }[] }) => {
          const paint = list.getEntries().find((e) => e.name === 'first-contentful-paint');
          if (paint) resolve(paint.startTime);
        }).observe({ type: 'paint', buffered: true });
      }),
  );
}
