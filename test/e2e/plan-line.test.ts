// The page's "Plan" line (issue 42): beside each job form, the peak GPU memory of the job the form's values would
// make and whether it fits the budget, asked of the service with "dry_run": true once the form stops changing (not on
// every keystroke), and nothing queued by it.
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { Browser, chromium } from 'playwright-core';
import { auth, startApp, TestApp, TOKEN } from '../api/harness';
import { testPipeline } from '../api/test-pipelines';
import { ensureClientBuilt } from './client-build';
import { CHROMIUM, enterToken, expectText, open, SHOTS, shot, skip, text } from './page-helpers';

const PLANNED = /^Plan: peak \d+\.\d GiB of GPU memory, (fits|over) the 16\.0 GiB budget \(NVIDIA H200, assumed\)/;

describe('the plan line beside the forms (Chromium)', { skip }, () => {
  let browser: Browser;
  let t: TestApp;
  before(async () => {
    ensureClientBuilt();
    mkdirSync(SHOTS, { recursive: true });
    browser = await chromium.launch({ executablePath: CHROMIUM });
    t = await startApp({ builtinPipelines: false, env: { GPU_MEMORY_BUDGET: '16GiB' }, pipelines: [testPipeline('image', 'imgmain', { stepMs: 1 }), testPipeline('video', 'fastvid', { stepMs: 1 })] });
  });
  after(async () => {
    await browser?.close();
    await t?.close(true);
  });

  it('an image form and a video form show their peak in GiB, asked once the typing stops; no job is made', { timeout: 150_000 }, async () => {
    const o = await open(browser, t.url);
    const { page } = o;
    const plans: string[] = [];
    page.on('request', (r) => {
      if (r.method() === 'POST' && /\/api\/v1\/(image|generate)$/.test(new URL(r.url()).pathname)) plans.push(r.postData() ?? '');
    });
    try {
      await enterToken(page, TOKEN);
      await page.locator('#create').waitFor();
      await page.locator('#tab-image').click();
      const form = page.locator('#image-form');
      const line = form.locator('[data-role=plan]');
      // no prompt yet: the line says what it needs, and nothing was asked
      await expectText(line, /^Plan: write a prompt/);
      await form.locator('[name=size]').fill('256x256');
      await form.locator('[name=steps]').fill('2');
      // typed a key at a time: one plan for the words, not one a keystroke
      await form.locator('[name=prompt]').pressSequentially('a red kite over the sea', { delay: 40 });
      await expectText(line, PLANNED, 60_000);
      const image = plans.map((p) => JSON.parse(p));
      assert.equal(image.length, 1, JSON.stringify(image));
      assert.deepEqual(image[0], { prompt: 'a red kite over the sea', profile: 'imgmain', aspect: image[0].aspect, res: image[0].res, size: '256x256', steps: 2, cfg: image[0].cfg, dry_run: true });
      assert.ok(/over|fits/.test(await line.getAttribute('data-state') ?? ''));
      await shot(page, 'plan-line-image.png');

      await page.locator('#tab-video').click();
      const vform = page.locator('#video-form');
      const vline = vform.locator('[data-role=plan]');
      await vform.locator('[name=res]').selectOption('352p');
      await vform.locator('[name=seconds]').selectOption('1');
      await vform.locator('[name=prompt]').fill('a kite over the sea');
      await expectText(vline, PLANNED, 90_000);
      assert.match(plans.at(-1)!, /"res":"352p"/);
      // the image line stays as it was while its form is hidden
      assert.match(await text(line), PLANNED);

      const jobs = (await t.http.get('/api/jobs').set(auth)).body as unknown[];
      assert.deepEqual(jobs, [], 'a plan queues nothing');
      assert.deepEqual(o.errors, []);
      assert.deepEqual(o.offsite, []);
    } finally {
      await o.close();
    }
  });
});
