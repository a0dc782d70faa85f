// A job card fed by two sources at once: the live event stream patches it, the job-list poll replaces it. A poll
// answer read before an event and rendered after it must not step the card back (the page test's CI failure on
// 2026-11-25: "sampling" without its "Step 1 of 3", and no later event to mend it while the job waited at a gate).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Browser, chromium } from 'playwright-core';
import { auth, startApp, TOKEN } from '../api/harness';
import { makeGate } from '../api/control';
import { ensureClientBuilt } from './client-build';
import { gradientPng } from './fixtures';
import { CHROMIUM, enterToken, expectText, open, skip, text, until } from './page-helpers';
import { negativeOfReferencePipeline } from './reference-pipeline';

describe('live job cards (Chromium)', { skip }, () => {
  let browser: Browser;
  before(async () => {
    ensureClientBuilt();
    browser = await chromium.launch({ executablePath: CHROMIUM });
  });
  after(async () => {
    await browser?.close();
  });

  it('a list poll read before a progress event and rendered after it keeps the progress', { timeout: 60_000 }, async () => {
    const gate = makeGate();
    const t = await startApp({ pipelines: [negativeOfReferencePipeline('imgmain', { gate })] });
    const o = await open(browser, t.url);
    const { page } = o;
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    let held = 0;
    const png = await gradientPng();
    const submit = async (prompt: string): Promise<string> =>
      (await t.http.post('/api/images').set(auth).field('prompt', prompt).field('steps', '3').attach('images', png, 'g.png').expect(200)).body.id;
    try {
      await enterToken(page, TOKEN);
      await page.locator('#create').waitFor();
      const first = await submit('first');
      await until('the first job waiting at its first step', async () => gate.waiting > 0 || undefined);
      const stage = page.locator(`article.job[data-job-id="${first}"] [data-role=stage]`);
      await expectText(stage, /^(Step 0 of 3 · )?sampling$/);

      // From here every list poll is read from the server when the page asks, and answered when the test says.
      await page.route((u) => u.pathname === '/api/jobs', async (route) => {
        const answer = await route.fetch();
        held++;
        await released;
        await route.fulfill({ response: answer });
      });
      // A second job's queued event makes the page poll: the answer it holds has the first job with no progress.
      const second = await submit('second');
      await until('a list poll read and held', async () => held > 0 || undefined);
      gate.open();
      await expectText(stage, /^Step 1 of 3 · sampling$/);

      // The held answer is rendered (the second job's card comes only from it); the first card keeps its step.
      release();
      await page.locator(`article.job[data-job-id="${second}"]`).waitFor();
      assert.equal(await text(stage), 'Step 1 of 3 · sampling');
      await new Promise((r) => setTimeout(r, 500)); // nothing else moves it: the job waits at the gate
      assert.equal(await text(stage), 'Step 1 of 3 · sampling');
      assert.deepEqual(o.errors, []);
    } finally {
      release();
      gate.openAll();
      await o.close();
      await t.close(true);
    }
  });
});
