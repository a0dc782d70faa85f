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
import { CHROMIUM, enterToken, expectText, open, shot, skip, text, until } from './page-helpers';
import { testPipeline } from '../api/test-pipelines';
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
  // issue 46: the card shows the running job's live preview from its preview events, and drops it when it ends
  it('a running job shows its latest live preview under the progress bar; gone once it is done', { timeout: 60_000 }, async () => {
    const gate = makeGate();
    const t = await startApp({ builtinPipelines: false, pipelines: [testPipeline('image', 'imgmain', { gate, previews: true })] });
    const o = await open(browser, t.url);
    const { page } = o;
    try {
      await enterToken(page, TOKEN);
      await page.locator('#create').waitFor();
      const id = (await t.http.post('/api/v1/image').set(auth).send({ prompt: 'a preview', size: '384x256', steps: 3 }).expect(200)).body.id as string;
      await until('the job waiting at its first step', async () => gate.waiting > 0 || undefined);
      gate.open(); // step 1 runs and its preview follows; the job waits at step 2's gate
      const img = page.locator(`article.job[data-job-id="${id}"] img.job-preview`);
      // the server has it (GET /api/jobs/{id}/preview), then the page shows it
      const served = await until('the preview served', async () => {
        const r = await t.http.get(`/api/jobs/${id}/preview`).set(auth);
        return r.status === 200 ? r : undefined;
      });
      assert.equal(served.headers['x-preview-step'], '1');
      await img.waitFor({ state: 'visible' });
      const shown = await until('the preview loaded', async () => {
        type Img = { complete: boolean; naturalWidth: number; naturalHeight: number; alt: string; getAttribute(n: string): string | null };
        const s = await img.evaluate((el) => {
          const i = el as unknown as Img;
          return i.complete && i.naturalWidth > 0 ? { w: i.naturalWidth, h: i.naturalHeight, alt: i.alt, src: i.getAttribute('src') } : undefined;
        });
        return s ?? undefined;
      });
      // the 384x256 output's aspect at a 256 px longer side, fetched with the token, after step 1 of 3
      assert.deepEqual([shown.w, shown.h], [256, 171]);
      assert.equal(shown.alt, `preview of job ${id} after step 1 of 3`);
      assert.match(shown.src!, new RegExp(`^/api/jobs/${id}/preview\\?step=1&token=`));
      await shot(page, 'live-preview.png');
      gate.openAll();
      await expectText(page.locator(`article.job[data-job-id="${id}"] [data-role=status]`), /^done$/, 20_000);
      await img.waitFor({ state: 'hidden' });
      assert.deepEqual(o.errors, []);
    } finally {
      gate.openAll();
      await o.close();
      await t.close(true);
    }
  });
});
