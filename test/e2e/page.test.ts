// The bundled web page, end to end: the real app (test harness, injected pipelines) serves the built client, and
// headless Chromium (Debian's package, driven by playwright-core) uses it like a person would. Screenshots land in
// build/e2e/ for a human to look at.
import assert from 'node:assert/strict';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Browser, chromium } from 'playwright-core';
import sharp from 'sharp';
import { startApp, TestApp, TOKEN, auth } from '../api/harness';
import { wavBytes } from '../api/inputs';
import { makeGate } from '../api/control';
import { testPipeline } from '../api/test-pipelines';
import { ensureClientBuilt, typecheckClient } from './client-build';
import { gradientPng, REF_SIDE, refPixel } from './fixtures';
import { CHROMIUM, DESKTOP, enterToken, expectText, noHorizontalScroll, open, Opened, PHONE, SHOTS, shot, skip, text, until } from './page-helpers';
import { negativeOfReferencePipeline } from './reference-pipeline';

/** The e2e uploads' wav: `seconds` of a 220 Hz tone at 16 kHz. */
const toneWav = (seconds: number) => wavBytes(seconds, 16000, 220);

describe('web page (Chromium)', { skip }, () => {
  let browser: Browser;

  before(async () => {
    ensureClientBuilt();
    mkdirSync(SHOTS, { recursive: true });
    browser = await chromium.launch({ executablePath: CHROMIUM });
  });
  after(async () => {
    await browser?.close();
  });

  it('the client type-checks (vite build only strips types)', () => {
    assert.equal(typecheckClient(), '');
  });

  it('token, image job from a reference file watched to done, result opened, settings reused, job deleted', { timeout: 90_000 }, async () => {
    const gate = makeGate();
    const t = await startApp({ pipelines: [negativeOfReferencePipeline('imgmain', { gate })] });
    const o = await open(browser, t.url);
    const { page } = o;
    try {
      // No token yet: the panel asks for one; a wrong one gets a clear 401 message.
      await page.locator('#token-panel').waitFor();
      await enterToken(page, 'wrong-token-1234');
      await expectText(page.locator('.token-message'), /refused this token \(401 bad token\)/);
      assert.ok(await page.locator('#create').isHidden());
      await enterToken(page, TOKEN);
      await page.locator('#create').waitFor();
      assert.equal(await page.evaluate("localStorage.getItem('kiln.token')"), TOKEN);

      // Status line: online, the GPU section, the queue, per-profile weights.
      const status = page.locator('#status');
      await status.locator('[data-role=queue]').waitFor();
      await until('the GPU part of the status line', async () => ((await status.textContent()) ?? '').includes('no GPU (test: no adapter probed)') || undefined);
      await expectText(status, /online/);
      // The test image pipeline and the built-in models on their generated demo checkpoints (speech, imgmain_bf16,
      // Krea 2 Turbo's two profiles, the six video profiles) are demo; none is missing.
      await expectText(status.locator('.weights summary'), /11 demo$/);

      // Image form: choices from /api/config, the limits said before submit, the reference previewed.
      await page.locator('#tab-image').click();
      const form = page.locator('#image-form');
      const profiles = await form.locator('select[name=profile] option').allTextContents();
      assert.deepEqual(profiles.map((p) => p.split(' ')[0]), ['imgmain', 'imgmain_bf16', 'imgart_turbo', 'imgart_turbo_int8']);
      assert.match(profiles[0], /demo weights/);
      assert.match(profiles[1], /demo weights/);
      assert.match(profiles[2], /demo weights/);
      await expectText(form.locator('[data-field=profile] .hint'), /8-bit integer quantised/);
      // imgmain_bf16 runs the trained demo checkpoint: its size and a prompt of its grammar are preselected, and the
      // hint says why; back on imgmain (a test pipeline, no suggestion) the untouched size empties again.
      await form.locator('select[name=profile]').selectOption('imgmain_bf16');
      assert.equal(await form.locator('[name=size]').inputValue(), '256x256');
      await expectText(form.locator('[data-field=size] .hint'), /256x256 preselected: the demo weights were trained at 256x256 and 512x512 on "a <color> <shape>/);
      assert.match((await form.locator('[name=prompt]').getAttribute('placeholder')) ?? '', /^e\.g\. a yellow circle at the left on a blue background$/);
      await form.locator('select[name=profile]').selectOption('imgmain');
      assert.equal(await form.locator('[name=size]').inputValue(), '');
      await expectText(form.locator('[data-field=images] .hint'), /1 to 10: editing.*at most 25\.0 MB each/i);
      await form.locator('[name=prompt]').fill('the negative of a gradient');
      await form.locator('[name=steps]').fill('3');
      const png = await gradientPng();
      await form.locator('input[name=images-picker]').setInputFiles({ name: 'gradient.png', mimeType: 'image/png', buffer: png });
      // The preview says the image's size once the browser has read it.
      await form.locator('.previews li', { hasText: '64×64 · ' }).waitFor();
      await expectText(form.locator('.previews li'), /1\. gradient\.png/);
      await form.locator('button[type=submit]').click();

      // Live status: held at the first step by the gate, then one step further.
      const first = page.locator('article.job').first();
      await first.locator('.badge.running').waitFor();
      const id = (await first.getAttribute('data-job-id'))!;
      const card = page.locator(`article.job[data-job-id="${id}"]`);
      await expectText(form.locator('.form-result'), new RegExp(`Queued as ${id}`));
      await until('the pipeline waiting at step 1', async () => gate.waiting > 0 || undefined);
      gate.open();
      await card.locator('[data-role=stage][data-stage="采样"]', { hasText: 'Step 1 of 3 · sampling' }).waitFor();
      assert.ok(o.streams.length > 0, 'the page follows GET /api/events (live events, not a fast poll)');
      assert.equal(await card.locator('[role=progressbar]').getAttribute('aria-valuenow'), '1');
      await status.locator('[data-role=current]', { hasText: `running ${id}` }).waitFor();

      // A second job waits behind it (queue position), and is cancelled from the page.
      await form.locator('button[type=submit]').click();
      const second = page.locator('article.job').first().and(page.locator(`article.job:not([data-job-id="${id}"])`));
      await second.locator('.job-live', { hasText: 'Position 1 in the queue' }).waitFor();
      await status.locator('[data-role=queue]', { hasText: '1 queued' }).waitFor();
      await shot(page, 'desktop-running.png');
      await second.getByRole('button', { name: 'Cancel' }).click();
      await second.getByRole('button', { name: 'Yes, cancel' }).click();
      await second.locator('.badge.failed').waitFor();
      assert.equal(await text(second.locator('.job-error')), 'Cancelled before it ran.');
      const secondId = (await second.getAttribute('data-job-id'))!;
      assert.equal((await t.http.get(`/api/jobs/${secondId}`).set(auth)).body.error, 'cancelled');
      await second.getByRole('button', { name: 'Delete' }).click();
      await second.getByRole('button', { name: 'Yes, delete' }).click();
      await page.locator(`article.job[data-job-id="${secondId}"]`).waitFor({ state: 'detached' });
      gate.openAll();

      // Done: the result inline is the negative of the uploaded gradient, at the job's size.
      await card.locator('.badge.done').waitFor();
      await status.locator('[data-role=current]', { hasText: 'idle' }).waitFor();
      const img = card.locator('.job-result img');
      await until('the result image to load', () => img.evaluate((el: any) => (el.complete && el.naturalWidth > 0 ? true : undefined)));
      const job = (await t.http.get(`/api/jobs/${id}`).set(auth)).body;
      assert.equal(job.size, '1024x1024');
      assert.equal(job.mode, 'edit');
      const points = [[300, 200], [700, 810], [512, 512], [130, 900]];
      const seen = await img.evaluate((el: any, pts: number[][]) => {
        const c = el.ownerDocument.createElement('canvas');
        c.width = el.naturalWidth;
        c.height = el.naturalHeight;
        const g = c.getContext('2d');
        g.drawImage(el, 0, 0);
        return { w: el.naturalWidth, h: el.naturalHeight, px: pts.map(([x, y]) => Array.from(g.getImageData(x, y, 1, 1).data as ArrayLike<number>).slice(0, 3)) };
      }, points);
      assert.deepEqual([seen.w, seen.h], [1024, 1024]);
      points.forEach(([x, y], i) => {
        // Output pixel (x, y) samples the reference at ((x + 0.5) / 16 - 0.5, ...): 1024 / 64 = 16.
        const scale = 1024 / REF_SIDE;
        const u = (x + 0.5) / scale - 0.5;
        const v = (y + 0.5) / scale - 0.5;
        const ref = [(255 * u) / (REF_SIDE - 1), (255 * v) / (REF_SIDE - 1), refPixel(0, 0)[2]];
        const want = ref.map((c) => 255 - c);
        seen.px[i].forEach((c, k) => assert.ok(Math.abs(c - want[k]) <= 4, `pixel (${x}, ${y}) channel ${k}: ${c}, expected ${want[k].toFixed(1)} (tolerance 4)`));
      });
      assert.equal(await card.locator('a.download').getAttribute('href'), `/out/${id}.png`);
      await expectText(card.locator('.job-live'), /Made in/);
      await card.locator('.job-params summary').click();
      const params = await text(card.locator('.params'));
      assert.match(params, /modeedit/);
      assert.match(params, new RegExp(`seed${job.seed}`));
      await noHorizontalScroll(page);
      await shot(page, 'desktop-done.png');

      // Open the result full size.
      await card.locator('.job-result .thumb').click();
      const big = page.locator('#viewer[open] img');
      await until('the full-size image', () => big.evaluate((el: any) => (el.complete && el.naturalWidth === 1024 ? true : undefined)));
      await shot(page, 'desktop-viewer.png');
      await page.keyboard.press('Escape');
      await page.locator('#viewer[open]').waitFor({ state: 'detached' });

      // Use these settings again: the form gets the job's prompt and the seed it used.
      await form.locator('[name=prompt]').fill('something else');
      await form.locator('[name=seed]').fill('-1');
      await card.getByRole('button', { name: 'Use these settings again' }).click();
      assert.equal(await form.locator('[name=prompt]').inputValue(), 'the negative of a gradient');
      assert.equal(await form.locator('[name=seed]').inputValue(), String(job.seed));
      assert.equal(await form.locator('[name=steps]').inputValue(), '3');
      await expectText(form.locator('.form-result'), /Its input image is not kept by the service/);

      // Phone width: one column, nothing wider than the screen.
      await page.setViewportSize(PHONE);
      await noHorizontalScroll(page);
      await shot(page, 'phone-done.png');
      // The demo weights' notes carry long file paths without spaces (the video profiles' under the data dir, the
      // speech one): they wrap inside the screen, in the forms and in the status line's list (issue 14 bug 4).
      await page.locator('#tab-video').click();
      await expectText(page.locator('#video-form [data-field=profile] .hint'), /Demo weights: A tiny random MiniMax H3 checkpoint .*\/demo-weights\//);
      await noHorizontalScroll(page);
      for (const tab of ['speech', 'image']) {
        await page.locator(`#tab-${tab}`).click();
        await noHorizontalScroll(page);
      }
      await page.locator('#status .weights summary').click();
      await noHorizontalScroll(page);
      await page.locator('#status .weights summary').click();
      await page.setViewportSize(DESKTOP);

      // The token is remembered: a reload goes straight to the page.
      await page.reload();
      await page.locator(`article.job[data-job-id="${id}"] .badge.done`).waitFor();
      assert.ok(await page.locator('#token-panel').isHidden());

      // Delete, with a confirmation; "Keep" backs out.
      const again = page.locator(`article.job[data-job-id="${id}"]`);
      await again.getByRole('button', { name: 'Delete' }).click();
      await again.getByRole('button', { name: 'Keep' }).click();
      assert.equal((await t.http.get(`/api/jobs/${id}`).set(auth)).status, 200);
      await again.getByRole('button', { name: 'Delete' }).click();
      await expectText(again.locator('.confirm-text'), /Delete this job and its file\?/);
      await again.getByRole('button', { name: 'Yes, delete' }).click();
      await again.waitFor({ state: 'detached' });
      assert.equal((await t.http.get(`/api/jobs/${id}`).set(auth)).status, 404);
      assert.equal(existsSync(join(t.dataDir, 'out', `${id}.png`)), false);
      await expectText(page.locator('#jobs'), /No jobs yet/);

      assert.deepEqual(o.offsite, []);
      assert.deepEqual(o.errors, []);
    } finally {
      gate.openAll();
      await o.close();
      await t.close(true);
    }
  });

  it('phone (390 px): the job just queued comes into view; a small result opens large over a dimmed page', { timeout: 60_000 }, async () => {
    const t = await startApp({ builtinPipelines: false, pipelines: [testPipeline('image', 'imgmain', { stepMs: 1 })] });
    const o = await open(browser, t.url, PHONE);
    const { page } = o;
    try {
      await enterToken(page, TOKEN);
      await page.locator('#create').waitFor();
      await page.locator('#tab-image').click();
      const form = page.locator('#image-form');
      await form.locator('[name=prompt]').fill('a small square');
      await form.locator('[name=size]').fill('256x256');
      await form.locator('button[type=submit]').scrollIntoViewIfNeeded();
      await form.locator('button[type=submit]').click();
      const card = page.locator('article.job').first();
      await card.waitFor();
      // the card, its head at least, inside the screen without the user scrolling
      const inView = await until('the queued job in view', async () => {
        const b = await card.boundingBox();
        return b && b.y >= 0 && b.y + Math.min(b.height, 120) <= PHONE.height ? b : undefined;
      });
      assert.ok(inView.y >= 0);
      await page.screenshot({ path: join(SHOTS, 'phone-queued.png') });
      await card.locator('.badge.done').waitFor();
      // the light of the page at the screen's bottom left corner, before and with the result open over it
      const corner = async () => {
        const { data } = await sharp(await page.screenshot({ clip: { x: 2, y: PHONE.height - 12, width: 10, height: 10 } })).removeAlpha().raw().toBuffer({ resolveWithObject: true });
        return data.reduce((a, b) => a + b, 0) / data.length;
      };
      const lit = await corner();
      await card.locator('.job-result .thumb').click();
      const big = page.locator('#viewer[open] img');
      const natural = await until('the image loaded', () => big.evaluate((el: any) => (el.complete && el.naturalWidth > 0 ? el.naturalWidth as number : undefined)));
      assert.ok(natural <= 256, `a small result: ${natural} px`);
      const shown = (await big.boundingBox())!;
      assert.ok(shown.width >= PHONE.width * 0.9, `a ${natural} px result fills the phone's width: shown ${shown.width} px`);
      const dimmed = await corner();
      assert.ok(dimmed <= 0.15 * lit, `the page behind is dimmed to at most 15% of its light: ${dimmed.toFixed(1)} of ${lit.toFixed(1)}`);
      await page.screenshot({ path: join(SHOTS, 'phone-viewer.png') });
      await page.keyboard.press('Escape');
      assert.deepEqual(o.offsite, []);
      assert.deepEqual(o.errors, []);
    } finally {
      await o.close();
      await t.close(true);
    }
  });

  describe('without models', () => {
    let t: TestApp;
    let o: Opened;
    before(async () => {
      t = await startApp({ builtinPipelines: false }); // a service with no model at all, speech included
      o = await open(browser, t.url, PHONE);
      await enterToken(o.page, TOKEN);
      await o.page.locator('#create').waitFor();
    });
    after(async () => {
      await o?.close();
      await t?.close(true);
    });

    it('an image job whose model is not built: the 400 reason at the profile field, no job made', { timeout: 60_000 }, async () => {
      const { page } = o;
      await page.locator('#tab-image').click();
      const form = page.locator('#image-form');
      await form.locator('[name=prompt]').fill('a kiln at dusk');
      await form.locator('input[name=images-picker]').setInputFiles({ name: 'gradient.png', mimeType: 'image/png', buffer: await gradientPng() });
      await form.locator('button[type=submit]').click();
      const reason = form.locator('[data-error-for="profile"]');
      await reason.waitFor();
      await expectText(reason, /^profile imgmain: the Qwen-Image-2\.1 model is not built into this service yet/);
      assert.equal(Number((await t.http.get('/api/jobs').set(auth)).headers['x-total-count']), 0, 'refused at creation: no failed job');
      await expectText(page.locator('#status .weights summary'), /11 missing/);
      // The profile's missing-weights note: one line under Profile, the files it lacks on demand (issue 47).
      const note = form.locator('[data-field=profile] .weights-note.missing');
      await expectText(note.locator('summary'), /^Not built yet · details$/);
      const line = await note.locator('summary').evaluate((el: any) => [el.getBoundingClientRect().height, parseFloat((globalThis as any).getComputedStyle(el).lineHeight)]) as number[];
      assert.ok(line[0] <= line[1] * 1.5, `the note's summary is one line: ${line[0]} px high, lines of ${line[1]} px`);
      assert.ok(await note.locator('.weights-detail').isHidden(), 'the details are closed');
      await note.locator('summary').click();
      await expectText(note.locator('.weights-detail'), /The Qwen-Image-2\.1 model behind imgmain is not built into this service yet/);
      await noHorizontalScroll(page);
      await note.locator('summary').click();
      // The per-profile weights list opens inside the phone's screen.
      await page.locator('#status .weights summary').click();
      const list = page.locator('#status .weights ul');
      assert.equal(await list.locator('li').count(), 11);
      await expectText(list, /missing imgmain image/);
      const box = (await list.boundingBox())!;
      assert.ok(box.x >= 0 && box.x + box.width <= PHONE.width, `weights list at x ${box.x}..${box.x + box.width}`);
      await page.screenshot({ path: join(SHOTS, 'phone-weights.png') });
      await page.locator('#status .weights summary').click();
      await noHorizontalScroll(page);
      await shot(page, 'phone-refused.png');
      assert.deepEqual(o.offsite, []);
      assert.deepEqual(o.errors, []);
    });

    it("bad fields: the server's 400 and 422 reasons beside the field they name", { timeout: 60_000 }, async () => {
      const { page } = o;
      await page.setViewportSize(DESKTOP);
      await page.locator('#tab-image').click();
      const form = page.locator('#image-form');
      const reason = (field: string) => form.locator(`[data-error-for="${field}"]`);

      // 400 naming a field: an explicit size off the 32 grid.
      const server = (await t.http.post('/api/images').set(auth).field('prompt', 'x').field('size', '100x100')).body.detail;
      assert.match(server, /^size: /);
      await form.locator('[name=prompt]').fill('x');
      await form.locator('[name=size]').fill('100x100');
      await form.locator('button[type=submit]').click();
      await reason('size').waitFor();
      assert.equal(await text(reason('size')), server);
      assert.ok(await form.locator('[data-field=size]').evaluate((el: any) => el.classList.contains('invalid')));
      assert.ok(await reason('prompt').isHidden());

      // 422: steps that are not a whole number (detail[].loc names steps).
      await form.locator('[name=size]').fill('');
      await form.locator('[name=steps]').fill('1.5');
      await form.locator('button[type=submit]').click();
      await reason('steps').waitFor();
      await expectText(reason('steps'), /valid integer/);
      assert.ok(await reason('size').isHidden());

      // 400 about the prompt.
      await form.locator('[name=steps]').fill('0');
      await form.locator('[name=prompt]').fill('   ');
      await form.locator('button[type=submit]').click();
      await reason('prompt').waitFor();
      await expectText(reason('prompt'), /prompt is empty/);
      // Several at once (issue 47): a blank prompt and a size off the grid; the server names both, the page flags both.
      await form.locator('[name=size]').fill('300x300');
      await form.locator('button[type=submit]').click();
      await reason('size').waitFor();
      await expectText(reason('prompt'), /^prompt is empty; say what to make$/);
      await expectText(reason('size'), /^size: width 300 must be a multiple of 32/);
      for (const f of ['prompt', 'size']) assert.ok(await form.locator(`[data-field=${f}]`).evaluate((el: any) => el.classList.contains('invalid')), f);
      await shot(page, 'desktop-errors.png');
      await form.locator('[name=size]').fill('');

      // Video: a clip too short for the limits is caught before anything is sent.
      await page.locator('#tab-video').click();
      const video = page.locator('#video-form');
      await expectText(video.locator('[data-field=audios] .hint'), /Up to 3 clips of 2 to 15 s each/);
      await video.locator('[name=prompt]').fill('a tone');
      await video.locator('input[name=audios-picker]').setInputFiles({ name: 'short.wav', mimeType: 'audio/wav', buffer: toneWav(1) });
      await video.locator('[data-error-for=audios]', { hasText: 'clips must be 2 to 15 s' }).waitFor();
      await video.locator('button[type=submit]').click();
      assert.equal(Number((await t.http.get('/api/jobs?kind=video').set(auth)).headers['x-total-count']), 0);

      // Speech without its model: the server's 503 reason at the form; the clip's length shown.
      await page.locator('#tab-speech').click();
      const speech = page.locator('#speech-form');
      await expectText(speech.locator('.notice'), /Speech requests answer 503 until the model is built/);
      await speech.locator('[name=text]').fill('hello');
      await speech.locator('input[name=ref_audio-picker]').setInputFiles({ name: 'voice.wav', mimeType: 'audio/wav', buffer: toneWav(4) });
      await speech.locator('.previews li', { hasText: '4.0 s' }).waitFor();
      await speech.locator('button[type=submit]').click();
      await speech.locator('.form-error').waitFor();
      await expectText(speech.locator('.form-error'), /speech synthesis is not available yet.*HTTP 503/);
      await shot(page, 'desktop-speech-503.png');

      assert.deepEqual(o.offsite, []);
      assert.deepEqual(o.errors, []);
    });

    it('a video job with a keyframe and a soundtrack clip is accepted with every field, then fails with its reason', { timeout: 60_000 }, async () => {
      // its own service: one video profile served by a test pipeline that always fails (the model of this
      // describe's service is missing, so it would refuse the job at creation)
      const failing = await startApp({ builtinPipelines: false, pipelines: [testPipeline('video', 'fastvid_4step_int8', { fail: 'the test pipeline of this profile always fails' })] });
      const v = await open(browser, failing.url);
      const { page } = v;
      try {
        await enterToken(page, TOKEN);
        await page.locator('#create').waitFor();
        await page.locator('#tab-video').click();
        const video = page.locator('#video-form');
        await video.locator('[name=prompt]').fill('<Picture 1> hums along with <Audio 1>');
        await video.locator('[name=profile]').selectOption('fastvid_4step_int8');
        await expectText(video.locator('[data-field=steps] .hint'), /profile default \(4\)/);
        await video.locator('[name=aspect]').selectOption('9:16');
        await video.locator('[name=res]').selectOption('352p');
        assert.equal(await text(video.locator('[data-field=res] .hint')), '352×608 px');
        await video.locator('[name=seconds]').selectOption('3');
        await expectText(video.locator('[data-field=seconds] .hint'), /^73 frames/);
        await video.locator('[name=seed]').fill('42');
        await video.locator('[name=image_mode]').selectOption('keyframe');
        await video.locator('[name=audio_mode]').selectOption('track');
        await video.locator('[name=tts_language]').selectOption('German');
        await video.locator('input[name=images-picker]').setInputFiles({ name: 'gradient.png', mimeType: 'image/png', buffer: await gradientPng() });
        await video.locator('input[name=audios-picker]').setInputFiles({ name: 'voice.wav', mimeType: 'audio/wav', buffer: toneWav(3) });
        await video.locator('.previews.audio li', { hasText: '3.0 s' }).waitFor();
        await video.locator('button[type=submit]').click();
        const card = page.locator('article.job[data-status=failed]', { hasText: '<Picture 1> hums along' });
        await card.waitFor();
        const id = (await card.getAttribute('data-job-id'))!;
        const job = (await failing.http.get(`/api/jobs/${id}`).set(auth)).body;
        assert.deepEqual([job.kind, job.profile, job.aspect, job.res, job.size, job.seconds, job.frames, job.seed, job.image_count, job.mode], ['video', 'fastvid_4step_int8', '9:16', '352p', '352x608', 3, 73, 42, 1, 'i2v']);
        assert.equal(job.error, 'the test pipeline of this profile always fails');
        assert.equal(await text(card.locator('.job-error')), `Failed: ${job.error}`);
        await page.emulateMedia({ colorScheme: 'dark' });
        await shot(page, 'desktop-dark-video.png');
        await page.emulateMedia({ colorScheme: 'light' });
        assert.deepEqual(v.offsite, []);
        assert.deepEqual(v.errors, []);
      } finally {
        await v.close();
        await failing.close(true);
      }
    });
  });
});
