// The Qwen-Image-2.1 pipeline on the demo checkpoint (the components are golden-tested in the other qwen_image21*
// files): seeded noise, the denoising loop (same seed -> same latents, another seed -> others, CFG changes the
// result and runs the negative prompt through its own cache, cancel stops between steps, progress per step), and
// the service pipeline end to end (a png of the asked size, stages in the spec's order, same seed -> same bytes).
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { CancelledError } from '../../src/common/errors';
import type { Engine } from '../../src/engine/engine';
import { planDemoQwenImage21, type QwenImage21DemoPlan } from '../../src/models/qwen_image21/demo';
import { referenceArea, STAGE, type Stage } from '../../src/catalog';
import { qwenImageTaskOf } from '../../src/models/qwen_image21/task';
import { openAndLoadParts, readQwenImage21Configs, type QwenImage21Configs, type QwenImage21Parts } from '../../src/models/qwen_image21/checkpoint';
import { latentGrid, QwenImage21Pipeline, type QwenImageTask, sampleLatents, seededNoise, textSequence } from '../../src/models/qwen_image21/pipeline';
import { referenceDimensions, rgbOverWhite } from '../../src/models/qwen_image21/references';
import { TextTokenizer } from '../../src/models/tokenizer';
import { pngBytes, pngSize } from '../api/inputs';
import { testEngine } from '../engine/helpers';
import { recordingContext } from './run-context';

describe('seededNoise', () => {
  test('standard normal, a function of (seed, shape) only, packed (tokens, channels) from channel-major draws', () => {
    const a = seededNoise(7, 16, 8, 6);
    assert.equal(a.length, 16 * 48);
    let m = 0;
    let v = 0;
    for (const x of a) m += x / a.length;
    for (const x of a) v += (x - m) ** 2 / a.length;
    assert.ok(Math.abs(m) < 0.1 && Math.abs(v - 1) < 0.15, `mean ${m}, var ${v}`);
    assert.deepEqual(seededNoise(7, 16, 8, 6), a, 'same seed, same noise');
    const b = seededNoise(8, 16, 8, 6);
    assert.ok(a.some((x, i) => x !== b[i]), 'another seed, other noise');
    // channel-major draws: a wider grid keeps channel 0's first 48 draws as its first 48 tokens
    const wide = seededNoise(7, 16, 8, 12);
    const c0 = (t: Float32Array, n: number) => Array.from({ length: n }, (_, i) => t[i * 16]);
    assert.deepEqual(c0(wide, 48), c0(a, 48));
    assert.notDeepEqual(Array.from(wide.subarray(48 * 16, 48 * 16 + 16)), Array.from(a.subarray(0, 16)));
  });

  test('latentGrid and textSequence: 16 px per token, rounded down to whole 2x2 slots', () => {
    assert.deepEqual(latentGrid(1024, 1024), { h: 64, w: 64 });
    assert.deepEqual(latentGrid(1344, 768), { h: 48, w: 84 });
    assert.deepEqual(latentGrid(300, 260), { h: 16, w: 18 });
    assert.throws(() => latentGrid(16, 512), /smaller than 32x32/);
    const l = textSequence(5, 4, 6);
    assert.deepEqual([l.prefixLength, l.targetLength, l.encoderLength, l.referenceTokens], [5, 24, 5, 0]);
  });

  test('rgbOverWhite: channels-last RGB(A) to CHW RGB; alpha composites over white', () => {
    // 1x2 RGB: CHW out
    assert.deepEqual(Array.from(rgbOverWhite(Float32Array.from([0.5, -1, 0, 0.25, 0.75, -0.5]), 1, 2, 3)), [0.5, 0.25, -1, 0.75, 0, -0.5]);
    // one RGBA pixel (-1, 0, 1): alpha -1 (transparent) / 1 (opaque) / 0 (half)
    assert.deepEqual(Array.from(rgbOverWhite(Float32Array.from([-1, 0, 1, -1]), 1, 1, 4)), [1, 1, 1]);
    assert.deepEqual(Array.from(rgbOverWhite(Float32Array.from([-1, 0, 1, 1]), 1, 1, 4)), [-1, 0, 1]);
    assert.deepEqual(Array.from(rgbOverWhite(Float32Array.from([-1, 0, 1, 0]), 1, 1, 4)), [0, 0.5, 1]);
    assert.throws(() => rgbOverWhite(new Float32Array(8), 2, 2, 2), /2 channels/);
  });
});

describe('image tasks -> pipeline tasks (src/models/qwen_image21/task.ts)', () => {
  test('referenceArea: the res tier\'s area; an explicit size its own area within [512^2, 2048^2]', () => {
    assert.equal(referenceArea('1K', 1344, 768), 1024 * 1024);
    assert.equal(referenceArea('2K', 2752, 1536), 2048 * 2048);
    assert.equal(referenceArea('custom', 256, 256), 512 * 512);
    assert.equal(referenceArea('custom', 1280, 720), 1280 * 720);
    assert.equal(referenceArea('custom', 4096, 4096), 2048 * 2048);
  });

  test('referenceDimensions: upstream\'s calculate_dimensions (nearest multiples of 32 of sqrt(area * ratio), w / ratio)', () => {
    assert.deepEqual(referenceDimensions(1024 * 1024, 3000, 3000), { width: 1024, height: 1024 });
    assert.deepEqual(referenceDimensions(1024 * 1024, 1920, 1080), { width: 1376, height: 768 });
    assert.deepEqual(referenceDimensions(1024 * 1024, 96, 64), { width: 1248, height: 832 });
    assert.deepEqual(referenceDimensions(512 * 512, 40, 72), { width: 384, height: 672 });
    // Python's round() halves to even: 1040 / 32 = 32.5 -> 32 (1024), 1072 / 32 = 33.5 -> 34 (1088)
    assert.deepEqual(referenceDimensions(1040 * 1040, 1, 1), { width: 1024, height: 1024 });
    assert.deepEqual(referenceDimensions(1072 * 1072, 1, 1), { width: 1088, height: 1088 });
    assert.deepEqual(referenceDimensions(1024 * 1024, 8000, 10), { width: 28960, height: 32 }, 'never below one 32 step');
  });

  test('qwenImageTaskOf: the task\'s prompt, negative, cfg, seed, steps, resolved size and input files', () => {
    const t = qwenImageTaskOf({
      id: 'j', kind: 'image', profile: 'imgmain_bf16', images: ['/in/a.png'], audios: [], output: '/o/j.png',
      params: { prompt: 'p', negative: 'n', cfg: 2.5, seed: 9, steps: 3, width: 1344, height: 768, res: '1K', mode: 'edit' },
    });
    assert.deepEqual(
      [t.prompt, t.negative, t.cfg, t.seed, t.steps, t.width, t.height, t.references, t.referenceArea, t.outputPath],
      ['p', 'n', 2.5, 9, 3, 1344, 768, ['/in/a.png'], 1024 * 1024, '/o/j.png'],
    );
    assert.deepEqual([t.png.profile, t.png.seed, t.png.cfg, t.png.negative_prompt], ['imgmain_bf16', 9, 2.5, 'n']);
  });
});

describe('Qwen-Image-2.1 denoising loop on the demo checkpoint', () => {
  let e: Engine;
  let scratch: string;
  let plan: QwenImage21DemoPlan;
  let cfg: QwenImage21Configs;
  let parts: QwenImage21Parts;
  before(async () => {
    e = await testEngine();
    scratch = mkdtempSync(join(tmpdir(), 'kiln-qi21-pipe-'));
    plan = await planDemoQwenImage21(e);
    await plan.write(join(scratch, 'demo'));
    cfg = await readQwenImage21Configs(join(scratch, 'demo'));
    const tok = await TextTokenizer.fromDir(join(scratch, 'demo', 'processor'));
    parts = await openAndLoadParts(e, join(scratch, 'demo'), cfg, { dtype: 'f32', int8: false }, tok);
  });
  after(() => {
    parts?.free();
    rmSync(scratch, { recursive: true, force: true });
  });

  const encode = (prompt: string) => {
    const c = parts.textEncoder.encode(prompt);
    return { embeds: c.reshape([1, c.shape[0]!, c.shape[1]!]) };
  };
  const run = async (o: { seed: number; cfg?: number; negative?: string; steps?: number; signal?: AbortSignal; onStep?: (d: number, t: number) => void }) => {
    const cond = encode('a red kiln at dusk');
    const negative = o.negative !== undefined ? encode(o.negative) : undefined;
    try {
      const x = await sampleLatents(e, parts.transformer, cfg.scheduler, {
        cond, negative, cfg: o.cfg ?? 1, seed: o.seed, steps: o.steps ?? 2, width: 256, height: 192, signal: o.signal, onStep: o.onStep,
      });
      assert.deepEqual(x.shape, [1, 12 * 16, cfg.transformer.inChannels]);
      const v = await e.read(x);
      x.free();
      return v;
    } finally {
      cond.embeds.free();
      negative?.embeds.free();
    }
  };

  test('the demo configs are what the folder says; the key lists are the loaders\'', () => {
    assert.deepEqual(cfg.transformer, plan.configs.transformer);
    assert.deepEqual(cfg.textEncoder, plan.configs.textEncoder);
    assert.ok(plan.keys.transformer.has('transformer_blocks.1.img_mlp.out.weight'));
    assert.ok(plan.keys.textEncoder.has('model.language_model.layers.1.mlp.down_proj.weight'));
  });

  test('same seed -> same latents, another seed -> others; progress after every step', async () => {
    const seen: [number, number][] = [];
    const a = await run({ seed: 11, onStep: (d, t) => void seen.push([d, t]) });
    assert.deepEqual(seen, [[1, 2], [2, 2]]);
    assert.ok(a.every(Number.isFinite));
    const b = await run({ seed: 11 });
    assert.deepEqual(b, a);
    const c = await run({ seed: 12 });
    assert.ok(c.some((x, i) => x !== a[i]));
    // the loop moved away from the noise: x_N = noise + sum dt * v
    const noise = seededNoise(11, cfg.transformer.inChannels, 12, 16);
    assert.ok(a.some((x, i) => Math.abs(x - noise[i]!) > 1e-3));
  });

  test('true CFG (cfg > 1 with a negative prompt) changes the latents; cfg 1 ignores the negative prompt', async () => {
    const plain = await run({ seed: 5 });
    assert.deepEqual(await run({ seed: 5, cfg: 1, negative: 'blurry' }), plain);
    const guided = await run({ seed: 5, cfg: 4, negative: 'blurry' });
    assert.ok(guided.some((x, i) => Math.abs(x - plain[i]!) > 1e-4));
    assert.deepEqual(await run({ seed: 5, cfg: 4, negative: 'blurry' }), guided, 'deterministic with CFG too');
  });

  test('cancel between steps: CancelledError, no further step', async () => {
    const abort = new AbortController();
    const seen: number[] = [];
    await assert.rejects(
      run({ seed: 1, steps: 4, signal: abort.signal, onStep: (d) => (seen.push(d), abort.abort('interrupted')) }),
      (err: unknown) => err instanceof CancelledError && /interrupted/.test((err as Error).message),
    );
    assert.deepEqual(seen, [1]);
  });
});

/** Width and height from a png's IHDR. */
describe('QwenImage21Pipeline (the service pipeline) on the demo checkpoint', () => {
  let scratch: string;
  let pipeline: QwenImage21Pipeline;
  let loadedBytes = 0;
  before(async () => {
    const e = await testEngine();
    scratch = mkdtempSync(join(tmpdir(), 'kiln-qi21-svc-'));
    const dir = join(scratch, 'demo');
    await (await planDemoQwenImage21(e)).write(dir);
    pipeline = new QwenImage21Pipeline({ engine: testEngine, checkpoint: async () => dir, int8: true, onLoaded: (b) => (loadedBytes = b) });
  });
  after(async () => {
    await pipeline?.unload();
    rmSync(scratch, { recursive: true, force: true });
  });

  const ctx = recordingContext;
  let n = 0;
  const task = (o: Partial<QwenImageTask> = {}): QwenImageTask => ({
    prompt: 'a red kiln at dusk', negative: '', cfg: 1, seed: 3, steps: 2, width: 256, height: 192, references: [], referenceArea: 512 * 512,
    outputPath: join(scratch, `out-${++n}.png`), png: { prompt: 'a red kiln at dusk', profile: 'imgmain', seed: 3, steps: 2 }, ...o,
  });

  test('load reports its stages; a job writes a png of the asked size, stages in the spec\'s order, progress per step', async () => {
    const stages: Stage[] = [];
    await pipeline.load(ctx({ stages }));
    assert.deepEqual(stages, [STAGE.loadTextEncoder]);
    assert.ok(loadedBytes > 0 && pipeline.residentBytes === loadedBytes);
    const progress: [number, number][] = [];
    const t = task();
    stages.length = 0;
    const started = Date.now();
    await pipeline.run(t, ctx({ stages, progress }));
    console.log(`# 256x192, 2 steps, demo weights: ${Date.now() - started} ms`);
    assert.deepEqual(stages, [STAGE.encode, STAGE.sample, STAGE.save]);
    assert.deepEqual(progress, [[0, 2], [1, 2], [2, 2]]);
    const png = readFileSync(t.outputPath);
    assert.deepEqual(pngSize(png), { width: 256, height: 192 });
    assert.match(png.toString('latin1'), /Seed: 3/, 'the parameters are recorded');
  });

  test('same task and seed -> the same bytes; another seed or CFG with a negative prompt -> other pictures', async () => {
    const [a, b, c, d] = [task(), task(), task({ seed: 4 }), task({ cfg: 3, negative: 'blurry' })];
    for (const x of [a, b, c, d]) await pipeline.run(x, ctx());
    const [pa, pb, pc, pd] = [a, b, c, d].map((x) => readFileSync(x.outputPath));
    assert.ok(pa!.equals(pb!), 'same seed, same bytes');
    assert.ok(!pa!.equals(pc!), 'another seed, another picture');
    assert.ok(!pa!.equals(pd!), 'CFG changes the picture');
  });

  test('cancel between steps: CancelledError, no png', async () => {
    const abort = new AbortController();
    const t = task({ steps: 5 });
    await assert.rejects(
      pipeline.run(t, ctx({ signal: abort.signal, onProgress: () => abort.abort('interrupted') })),
      (err: unknown) => err instanceof CancelledError,
    );
    assert.equal(existsSync(t.outputPath), false);
  });

  test('editing: references go through the vision tower and the VAE encoder; they change the picture, deterministically', async () => {
    const ref1 = join(scratch, 'ref1.png');
    const ref2 = join(scratch, 'ref2.png');
    writeFileSync(ref1, await pngBytes(96, 64));
    writeFileSync(ref2, await pngBytes(40, 72));
    const stages: Stage[] = [];
    const plain = task({ prompt: 'make Picture 1 blue' });
    const one = task({ prompt: 'make Picture 1 blue', references: [ref1] });
    const oneAgain = task({ prompt: 'make Picture 1 blue', references: [ref1] });
    const two = task({ prompt: 'put Picture 2 into Picture 1', references: [ref1, ref2], cfg: 2, negative: 'blurry' });
    await pipeline.run(plain, ctx());
    await pipeline.run(one, ctx({ stages }));
    assert.deepEqual(stages, [STAGE.encode, STAGE.sample, STAGE.save]);
    await pipeline.run(oneAgain, ctx());
    await pipeline.run(two, ctx());
    const [pp, p1, p1b, p2] = [plain, one, oneAgain, two].map((x) => readFileSync(x.outputPath));
    for (const p of [p1, p2]) assert.deepEqual(pngSize(p!), { width: 256, height: 192 }, 'the output keeps the asked size');
    assert.ok(p1!.equals(p1b!), 'same references and seed, same bytes');
    assert.ok(!p1!.equals(pp!), 'the reference changes the picture');
    await assert.rejects(pipeline.run(task({ references: [join(scratch, 'missing.png')] }), ctx()), /ENOENT|missing\.png/);
  });

  test('unload gives the GPU memory back', async () => {
    const e = await testEngine();
    const before = e.pool.stats().inUseBytes;
    await pipeline.unload();
    assert.equal(before - e.pool.stats().inUseBytes, loadedBytes);
  });
});
