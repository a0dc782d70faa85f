// What the page tests share: the browser's path, the viewports, a page opened with its offsite requests, event
// streams and errors recorded, and waits that poll the page instead of reading it at once.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { Browser, Locator, Page } from 'playwright-core';
import { repoRoot } from './client-build';

export const CHROMIUM = process.env.KILN_CHROMIUM ?? '/usr/bin/chromium';
export const SHOTS = join(repoRoot(), 'build', 'e2e');
export const DESKTOP = { width: 1280, height: 900 };
export const PHONE = { width: 390, height: 844 };
export const skip = !existsSync(CHROMIUM) && process.env.KILN_SKIP_CHROMIUM === '1' ? 'KILN_SKIP_CHROMIUM=1 and no Chromium' : false;

export interface Opened {
  page: Page;
  /** Requests that left the server's origin (must stay empty: everything is bundled). */
  offsite: string[];
  /** Same-origin requests to the live event stream. */
  streams: string[];
  /** Uncaught page errors and console errors. */
  errors: string[];
  close(): Promise<void>;
}

export async function open(browser: Browser, url: string, viewport = DESKTOP): Promise<Opened> {
  const ctx = await browser.newContext({ viewport, deviceScaleFactor: 1 });
  const page = await ctx.newPage();
  page.setDefaultTimeout(15_000);
  const origin = new URL(url).origin;
  const offsite: string[] = [];
  const streams: string[] = [];
  const errors: string[] = [];
  page.on('request', (r) => {
    const u = new URL(r.url());
    if ((u.protocol === 'http:' || u.protocol === 'https:' || u.protocol === 'ws:' || u.protocol === 'wss:') && u.origin !== origin) offsite.push(r.url());
    if (u.origin === origin && u.pathname === '/api/events') streams.push(r.url());
  });
  page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
  // 4xx answers the test provokes on purpose are logged by Chromium as console errors; those are expected.
  page.on('console', (m) => m.type() === 'error' && !/status of (400|401|404|422|503)/.test(m.text()) && errors.push(`console: ${m.text()}`));
  await page.goto(url);
  return { page, offsite, streams, errors, close: () => ctx.close() };
}

export async function enterToken(page: Page, token: string): Promise<void> {
  await page.locator('#token').fill(token);
  await page.locator('#token-form button[type=submit]').click();
}

export async function text(l: Locator): Promise<string> {
  return ((await l.textContent()) ?? '').trim();
}

/** Polls `probe` until it returns a value that is not undefined. */
export async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 15_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`e2e: timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Asserts that the locator's text matches, waiting for it first: the page fills most texts after a request
 * answers, so reading at once races the server (seen on CI: the 401 message read while still empty). */
export async function expectText(l: Locator, re: RegExp, timeoutMs = 10_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  let got = await text(l);
  while (!re.test(got) && Date.now() < end) {
    await new Promise((r) => setTimeout(r, 50));
    got = await text(l);
  }
  assert.match(got, re);
}

/** A full-page screenshot from the top (a sticky header would otherwise be drawn where the page was scrolled to). */
export async function shot(page: Page, name: string): Promise<void> {
  await page.evaluate('window.scrollTo(0, 0)');
  await page.screenshot({ path: join(SHOTS, name), fullPage: true });
}

export async function noHorizontalScroll(page: Page): Promise<void> {
  const [scroll, client] = await page.evaluate('[document.documentElement.scrollWidth, document.documentElement.clientWidth]') as [number, number];
  assert.ok(scroll <= client, `page is ${scroll}px wide in a ${client}px viewport`);
}
