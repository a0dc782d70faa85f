// Plans at the released sizes (src/plan): the real Krea 2 pipeline on the shape-only engine over a planned checkpoint.
// The resident bytes are checked against the one real-size figure measured on a GPU (docs/performance.md: the
// H200 bench loaded the same three parts, 16-bit, into 32.99 GiB); the CLI's JSON has the fields the issue names;
// budgets, style references and bad requests behave as a user would expect. The plan equals the real run on the
// demo checkpoints: test/models/plan_matches_run.test.ts.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, test } from 'node:test';
import { snapFrames, STAGE } from '../../src/catalog';
import { BadInputError } from '../../src/common/errors';
import { parseBytes } from '../../src/common/bytes';
import { kindOf, planJob, type JobPlan } from '../../src/plan/plan';

const GiB = 2 ** 30;
const run = promisify(execFile);

describe('plans at the released sizes', () => {
  let cache: string;
  let turbo: JobPlan;
  before(async () => {
    cache = mkdtempSync(join(tmpdir(), 'kiln-plan-cache-'));
    process.env.KILN_PLAN_CACHE = cache;
    turbo = await planJob({ prompt: 'a red kite over the sea', profile: 'imgart_turbo', size: '1024x1024', seed: 1 });
  });
  after(() => rmSync(cache, { recursive: true, force: true }));

  test('imgart_turbo at 1K: resident weights as the H200 measured them, stages in the spec\'s order, 8 steps of work', () => {
    const resident = turbo.resident.reduce((a, r) => a + r.bytes, 0);
    assert.ok(Math.abs(resident / GiB - 32.99) < 0.005, `resident ${(resident / GiB).toFixed(3)} GiB; the H200 bench measured 32.99 GiB`);
    assert.deepEqual(turbo.stages.map((s) => s.stage), [STAGE.loadModel, STAGE.loadTextEncoder, STAGE.encode, STAGE.sample, STAGE.save]);
    assert.equal(turbo.peak_gpu_bytes, Math.max(...turbo.stages.map((s) => s.peak_gpu_bytes)));
    assert.ok(turbo.peak_gpu_bytes > resident, 'activations come on top of the weights');
    const sample = turbo.stages.find((s) => s.stage === STAGE.sample)!;
    assert.equal(sample.steps, 8);
    // one DiT step: at least its GEMMs and attention (bench/image/krea2.ts's formula at 4096 image + >= 69 text tokens: 113.2 TFLOP)
    assert.ok(turbo.per_step!.flops > 113e12 && turbo.per_step!.flops < 125e12, `per step ${turbo.per_step!.flops / 1e12} TFLOP`);
    assert.equal(turbo.flops, turbo.stages.reduce((a, s) => a + s.flops, 0));
    assert.ok('sampling_s' in turbo.predicted && turbo.predicted.sampling_s > 60, 'predicted from the H200 rate measured for this profile');
    assert.equal(turbo.fits, true);
  });

  test('int8 holds less; a budget below the peak says the job does not fit; no measured rate means no prediction', async () => {
    const int8 = await planJob({ prompt: 'a red kite over the sea', profile: 'imgart_turbo_int8', size: '1024x1024', seed: 1 }, { budgetBytes: 2 * GiB });
    const dit = (p: JobPlan) => p.resident.find((r) => r.stage === STAGE.loadModel)!.bytes;
    assert.ok(dit(int8) < 0.6 * dit(turbo), `int8 DiT+VAE ${dit(int8) / GiB} GiB vs ${dit(turbo) / GiB} GiB`);
    assert.equal(int8.budget_bytes, 2 * GiB);
    assert.equal(int8.fits, false, 'two blocks, the DiT\'s rest, the VAE and the sampling hold more than 2 GiB');
    // the most frugal placement: the DiT's blocks and the text encoder's layers streamed, the encoder's rest on the host
    assert.equal(int8.offload.policy, 'blocks-streamed+text-encoder-streamed+text-encoder-rest-offloaded');
    assert.match(int8.offload.note, /it does not fit even so/);
    assert.ok('none' in int8.predicted, JSON.stringify(int8.predicted));
    assert.match(int8.predicted.none, /no measured whole-step rate for imgart_turbo_int8 on NVIDIA H200/);
  });

  test('style references add the vision tower\'s work to the encode stage; sizes count', async () => {
    const withRef = await planJob({ prompt: 'a red kite over the sea', profile: 'imgart_turbo', size: '1024x1024', seed: 1, images: ['800x600'] });
    const enc = (p: JobPlan) => p.stages.find((s) => s.stage === STAGE.encode)!.flops;
    assert.ok(enc(withRef) > 1.5 * enc(turbo), `encode ${enc(withRef) / 1e12} vs ${enc(turbo) / 1e12} TFLOP`);
    assert.equal(withRef.job.images, 1);
  });

  test('Qwen-Image-2.1 at its defaults (1K, 25 steps): the int8 transformer holds about half of the 16-bit one', async () => {
    const int8 = await planJob({ prompt: 'a red kite over the sea', profile: 'imgmain', seed: 1 });
    const bf16 = await planJob({ prompt: 'a red kite over the sea', profile: 'imgmain_bf16', seed: 1 });
    assert.deepEqual([int8.job.width, int8.job.height, int8.job.steps], [1024, 1024, 25], 'the spec\'s defaults, drafted by the API\'s rules');
    assert.deepEqual(int8.stages.map((s) => s.stage), turbo.stages.map((s) => s.stage));
    assert.equal(int8.stages.find((s) => s.stage === STAGE.sample)!.steps, 25);
    const model = (p: JobPlan) => p.resident.find((r) => r.stage === STAGE.loadModel)!.bytes;
    const text = (p: JobPlan) => p.resident.find((r) => r.stage === STAGE.loadTextEncoder)!.bytes;
    assert.equal(text(int8), text(bf16), 'the text encoder is 16-bit in both');
    assert.ok(model(int8) < 0.6 * model(bf16) && model(int8) > 0.4 * model(bf16), `${model(int8) / GiB} vs ${model(bf16) / GiB} GiB`);
    assert.equal(int8.flops, bf16.flops, 'the same work');
  });

  test('bad requests are refused with what to change', async () => {
    await assert.rejects(planJob({ text: 'x', ref_audio: 1 }), (e: Error) => e instanceof BadInputError && /ref_audio: give the reference clip's length in seconds, 3 to 30/.test(e.message));
    await assert.rejects(planJob({ prompt: 'x', profile: 'imgmain', images: ['512x512'] }), /plans for editing on imgmain are not built yet/);
    await assert.rejects(planJob({ prompt: 'x', size: '1000x1000', profile: 'imgart_turbo' }), /multiple of/);
    await assert.rejects(planJob({ prompt: 'x', profile: 'imgart_turbo', images: ['big'] }), /images\[0\]/);
    assert.throws(() => kindOf({ prompt: 'x' }), /add "kind"/);
    assert.equal(kindOf({ prompt: 'x', size: '512x512' }), 'image');
    assert.equal(kindOf({ prompt: 'x', seconds: 5 }), 'video');
    assert.deepEqual(['16GiB', '12 GB', '1024', '0.5KiB'].map((s) => parseBytes(s)), [16 * GiB, 12e9, 1024, 512]);
    assert.throws(() => parseBytes('lots'), /not a size/);
  });

  test('video at the released MiniMax H3 sizes: drafted by the API\'s rules, the spec\'s stages, int8 holds less than 16-bit', async () => {
    const req = { prompt: 'a red kite over the sea', res: '352p', seconds: 1, seed: 1 };
    const fast = await planJob({ ...req, profile: 'fastvid' });
    const int8 = await planJob({ ...req, profile: 'fastvid_4step_int8' });
    assert.equal(fast.kind, 'video');
    assert.deepEqual([fast.job.width, fast.job.height, fast.job.frames, fast.job.steps], [608, 352, snapFrames(1), 8], 'the catalog\'s 352p 16:9 size, 1 s on the frame grid, fastvid\'s 8 steps');
    assert.deepEqual(fast.stages.map((s) => s.stage), [STAGE.loadModel, STAGE.loadTextEncoder, STAGE.encode, STAGE.sample, STAGE.videoDecode, STAGE.audioDecode, STAGE.package, STAGE.save]);
    assert.equal(fast.stages.find((s) => s.stage === STAGE.sample)!.steps, 8);
    assert.equal(int8.stages.find((s) => s.stage === STAGE.sample)!.steps, 4);
    const model = (p: JobPlan) => p.resident.find((r) => r.stage === STAGE.loadModel)!.bytes;
    const text = (p: JobPlan) => p.resident.find((r) => r.stage === STAGE.loadTextEncoder)!.bytes;
    // the released DiT is 66.3 GB of BF16 (its index's total_size) and the text encoder 50 of the 32B's 64 layers
    assert.ok(model(fast) > 61.5 * GiB && model(fast) < 75 * GiB, `16-bit DiT + VAEs ${model(fast) / GiB} GiB`);
    assert.ok(model(int8) < 0.45 * model(fast), `int8 DiT (adaln_proj on the host) + VAEs ${model(int8) / GiB} GiB vs ${model(fast) / GiB} GiB`);
    assert.ok(text(int8) < 0.55 * text(fast) && text(fast) > 40 * GiB, `text encoder ${text(int8) / GiB} vs ${text(fast) / GiB} GiB`);
    assert.ok(fast.per_step!.flops > 0 && fast.peak_gpu_bytes === Math.max(...fast.stages.map((s) => s.peak_gpu_bytes)));
    // pictures given by size count: a keyframe is encoded (video VAE encoder, the vision tower) in the encode stage
    const kf = await planJob({ ...req, profile: 'fastvid', images: ['640x360'] });
    const enc = (p: JobPlan) => p.stages.find((s) => s.stage === STAGE.encode)!.flops;
    assert.equal(kf.job.mode, 'i2v');
    assert.ok(enc(kf) > enc(fast), `encode ${enc(kf) / 1e12} vs ${enc(fast) / 1e12} TFLOP`);
  });

  test('video under a 32 GiB budget: the int8 DiT waits on the host while the text encoder runs, so the job fits; a big budget keeps it resident', async () => {
    const req = { prompt: 'a red kite over the sea', profile: 'fastvid_4step_int8', res: '352p', seconds: 1, seed: 1 };
    const big = await planJob(req);
    const small = await planJob(req, { budgetBytes: 32 * GiB });
    const peakOf = (p: JobPlan, s: string) => p.stages.find((x) => x.stage === s)!.peak_gpu_bytes;
    assert.equal(big.offload.policy, 'resident');
    assert.equal(big.offload.host_to_gpu_bytes_per_job, 0);
    assert.equal(big.peak_gpu_bytes, peakOf(big, STAGE.encode), 'resident: the encode stage holds the DiT beside the encoder');
    assert.equal(small.offload.policy, 'dit-on-host-while-encoding');
    assert.ok(small.fits && small.peak_gpu_bytes <= 32 * GiB, `peak ${small.peak_gpu_bytes / GiB} GiB`);
    assert.ok(big.peak_gpu_bytes - small.peak_gpu_bytes > 15 * GiB, `${big.peak_gpu_bytes / GiB} -> ${small.peak_gpu_bytes / GiB} GiB`);
    // the DiT's bytes come back once: more than 15 GiB of int8 weights uploaded again, per job
    assert.ok(small.offload.host_to_gpu_bytes_per_job > 15 * GiB, `${small.offload.host_to_gpu_bytes_per_job / GiB} GiB`);
    assert.match(small.offload.note, /wait in host memory while the text encoder/);
    // the text encoder's own bytes are reported either way, and sampling does not change
    const text = (p: JobPlan) => p.resident.find((r) => r.stage === STAGE.loadTextEncoder)!.bytes;
    assert.equal(text(small), text(big));
    assert.equal(peakOf(small, STAGE.sample), peakOf(big, STAGE.sample));
  });

  test('video under a 12 GiB budget: the DiT\'s blocks load to and stream from host memory, the text encoder runs layer by layer, and the job fits', async () => {
    const p = await planJob({ prompt: 'a red kite over the sea', profile: 'fastvid', res: '352p', seconds: 1, seed: 1 }, { budgetBytes: 12 * GiB });
    const peakOf = (s: string) => p.stages.find((x) => x.stage === s)!.peak_gpu_bytes;
    assert.equal(p.offload.policy, 'blocks-streamed+text-encoder-streamed');
    assert.deepEqual(p.offload.streamed, ['transformer_blocks', 'text_encoder_layers']);
    assert.ok(peakOf(STAGE.sample) < 12 * GiB, `sampling ${peakOf(STAGE.sample) / GiB} GiB`);
    // each step uploads the 16-bit blocks (about 60 GiB) once, and the step's share of the AdaLN build
    assert.ok(p.offload.host_to_gpu_bytes_per_step > 55 * GiB && p.offload.host_to_gpu_bytes_per_step < 80 * GiB, `${p.offload.host_to_gpu_bytes_per_step / GiB} GiB a step`);
    // the load stage never holds the whole DiT (66 GB of BF16): its blocks went to the host one by one
    assert.ok(peakOf(STAGE.loadModel) < 12 * GiB, `load ${peakOf(STAGE.loadModel) / GiB} GiB`);
    // the 16-bit text encoder (over 40 GiB whole) uploads its layers once a job, two on the GPU at a time
    assert.ok(p.offload.host_to_gpu_bytes_per_job > 40 * GiB, `${p.offload.host_to_gpu_bytes_per_job / GiB} GiB a job`);
    assert.ok(peakOf(STAGE.encode) < 12 * GiB, `encode ${peakOf(STAGE.encode) / GiB} GiB`);
    assert.match(p.offload.note, /decoder layers .* uploaded in turn while encoding/);
    assert.equal(p.resident.find((r) => r.stage === STAGE.loadTextEncoder)!.bytes, 0);
    assert.ok(p.fits && p.peak_gpu_bytes <= 12 * GiB, `peak ${p.peak_gpu_bytes / GiB} GiB`);
  });

  test('speech at the released Qwen3-TTS-12Hz-1.7B sizes: a 10 s reference clip assumed, `seconds` sets how long it speaks; a video\'s tts_text speaks in its encode stage', async () => {
    const p = await planJob({ text: 'Hello there, this is a plan.', seconds: 4 });
    assert.equal(p.kind, 'tts');
    assert.equal(p.job.ref_seconds, 10);
    assert.ok(p.notes.some((n) => /a 10 s reference clip is assumed/.test(n)));
    assert.deepEqual(p.stages.map((s) => s.stage), [STAGE.loadModel, STAGE.encode, STAGE.sample, STAGE.audioDecode, STAGE.save]);
    assert.equal(p.stages.find((s) => s.stage === STAGE.sample)!.steps, 50, '4 s at 12.5 codec frames a second');
    const model = p.resident.find((r) => r.stage === STAGE.loadModel)!.bytes;
    // the 1.7B talker and code predictor in f16 (about 3.9 GB) with the f32 codec and speaker encoder
    assert.ok(model > 3.5 * GiB && model < 6 * GiB, `resident ${model / GiB} GiB`);
    const longer = await planJob({ text: 'Hello there, this is a plan.', seconds: 8, ref_audio: 20 });
    assert.equal(longer.stages.find((s) => s.stage === STAGE.sample)!.steps, 100);
    assert.ok(longer.flops > p.flops && longer.job.ref_seconds === 20);
    await assert.rejects(planJob({ text: ' ', kind: 'tts' }), /text/);
    const req = { prompt: 'a man says hi', profile: 'fastvid', res: '352p', seconds: 1, seed: 1 };
    const spoken = await planJob({ ...req, tts_text: 'Hi.', audios: [5] });
    const silent = await planJob(req);
    const enc = (j: JobPlan) => j.stages.find((s) => s.stage === STAGE.encode)!;
    assert.ok(enc(spoken).steps > 0 && enc(spoken).flops > enc(silent).flops + 0.1e12, 'the speech model spoke inside the encode stage');
  });

  test('video requests the table or the worker refuses are 400s from drafting, as the API answers them', async () => {
    const bad = (r: Record<string, unknown>, re: RegExp) => assert.rejects(planJob({ prompt: 'a kite', kind: 'video', ...r }), (e: Error) => e instanceof BadInputError && re.test(e.message));
    await bad({ profile: 'fastvid', res: '1080p' }, /res/);
    await bad({ profile: 'fastvid', seconds: 60 }, /seconds must be from/);
    await bad({ profile: 'fastvid', images: Array(12).fill('512x512') }, /images/);
    await bad({ profile: 'fastvid', audios: ['long'] }, /audios\[0\]/);
  });

  test('npm run plan -- --json prints one object with the fields machines read; a bad request exits 2 saying why', async () => {
    // --tuning: a folder holding one table with measured rates for the H200's vendor (a what-if, not a measurement)
    const tuning = join(cache, 'tuning');
    mkdirSync(tuning);
    const rates = { gemm: { small: 20, medium: 150, large: 300 }, attention: 150, memory_gbs: 3000, dispatch_us: 8 };
    writeFileSync(join(tuning, 'nvidia-hopper.json'), JSON.stringify({ version: 1, adapter: { vendor: 'nvidia', architecture: 'hopper' }, measured: 'what-if', gemm: {}, rates }));
    const { stdout } = await run('npm', ['run', '--silent', 'plan', '--', '{"prompt": "a lighthouse", "profile": "imgart_turbo", "size": "1024x1024"}', '--json', '--budget', '12GiB', '--tuning', tuning], { env: { ...process.env, KILN_PLAN_CACHE: cache } });
    const p = JSON.parse(stdout) as JobPlan;
    // the step's work per class at the table's rates: the arithmetic redone here from the plan's own per-step counts
    const cls = p.per_step!.by_class;
    assert.deepEqual(Object.keys(cls).sort(), ['attention', 'gemm-large', 'gemm-medium', 'memory'], 'a DiT step: GEMMs (its small products are GEMVs: memory-bound), attention, memory-bound ops, no convolution');
    for (const f of ['flops', 'bytes', 'dispatches'] as const) assert.ok(Math.abs(Object.values(cls).reduce((a, w) => a + w[f], 0) - p.per_step![f]) <= 1e-6 * p.per_step![f], f);
    const want = cls['gemm-medium']!.flops / 150e12 + cls['gemm-large']!.flops / 300e12 + cls.attention!.flops / 150e12
      + cls.memory!.bytes / 3000e9 + p.per_step!.dispatches * 8e-6;
    assert.ok('step_s' in p.predicted, JSON.stringify(p.predicted));
    assert.ok(Math.abs(p.predicted.step_s - want) < 1e-9, `${p.predicted.step_s} vs ${want}`);
    assert.ok(p.predicted.step_s > 0.3 && p.predicted.step_s < 0.6, `Krea 1K at these rates: about 114 TFLOP a step, mostly large GEMMs at 300 TFLOP/s (${p.predicted.step_s} s)`);
    assert.ok(Math.abs(p.predicted.sampling_s - 8 * p.predicted.step_s) < 1e-9);
    assert.match(p.predicted.basis, /nvidia-hopper\.json's rates \(measured what-if\)/);
    // the step's shapes: GEMMs and attentions, most FLOPs first, their FLOPs those of the GEMM and attention classes
    const shapes = p.per_step!.shapes;
    assert.ok(shapes.length > 3 && shapes.every((s, i) => i === 0 || shapes[i - 1]!.flops >= s.flops), JSON.stringify(shapes.slice(0, 5)));
    const counted = ['gemm-small', 'gemm-medium', 'gemm-large', 'attention'].reduce((a, k) => a + (cls[k]?.flops ?? 0), 0);
    assert.ok(Math.abs(shapes.reduce((a, s) => a + s.flops, 0) - counted) <= 1e-9 * counted);
    assert.ok(shapes.some((s) => /^attention B1 H48\/12 Lq4\d{3} Lk4\d{3} D128$/.test(s.shape)), 'Krea 1K\'s GQA attention');
    assert.equal(p.budget_bytes, 12 * GiB);
    // the DiT's blocks streamed (22.64 GiB of them uploaded a step: Turbo runs one forward a step), the text encoder
    // off the GPU while sampling: fits
    assert.equal(p.fits, true);
    assert.ok(p.peak_gpu_bytes < 12 * GiB && p.flops > 900e12 && p.dispatches > 1000);
    assert.equal(p.offload.policy, 'blocks-streamed+text-encoder-offloaded');
    assert.deepEqual(p.offload.streamed, ['transformer_blocks']);
    assert.ok(p.offload.host_to_gpu_bytes_per_step > 20 * GiB && p.offload.host_to_gpu_bytes_per_step < 25 * GiB, `${p.offload.host_to_gpu_bytes_per_step / GiB} GiB a step`);
    assert.ok(p.stages.every((s) => typeof s.stage === 'string' && s.peak_gpu_bytes > 0));
    assert.deepEqual(Object.keys(p.offload).sort(), ['host_to_gpu_bytes_per_job', 'host_to_gpu_bytes_per_step', 'note', 'policy', 'streamed']);
    await assert.rejects(run('npm', ['run', '--silent', 'plan', '--', '{"kind": "tts", "text": " "}']), (e: { code: number; stderr: string }) => e.code === 2 && /text/.test(e.stderr));
    // a video request (small and fast: 352p, 1 s) through the CLI npm run plan just built (build/plan)
    const cli = join(__dirname, '..', '..', '..', 'plan', 'src', 'plan', 'cli.js');
    const video = JSON.parse((await run('node', [cli, '{"prompt": "a lighthouse", "profile": "turbo_int8", "res": "352p", "seconds": 1}', '--json'], { env: { ...process.env, KILN_PLAN_CACHE: cache } })).stdout) as JobPlan;
    assert.equal(video.kind, 'video');
    assert.ok(video.peak_gpu_bytes > 20 * GiB && video.stages.length === 8 && video.stages.every((s) => s.peak_gpu_bytes > 0));
    await assert.rejects(run('node', [cli, '{"prompt": "x", "profile": "turbo_int8", "res": "1080p"}']), (e: { code: number; stderr: string }) => e.code === 2 && /unknown res "1080p"/.test(e.stderr));
  });

  // issue 42 "Smaller GPUs": the image text encoder off the GPU once the prompt is encoded, or its layers streamed,
  // the cheapest that fits; the default budget changes nothing (the same bytes as before any policy)
  test('image residency under a budget: resident by default, offloaded at 24 GiB, streamed at 16 GiB (imgmain 1K)', async () => {
    const req = { prompt: 'a red kite over the sea', profile: 'imgmain', seed: 1 };
    const [full, b24, b16] = [await planJob(req), await planJob(req, { budgetBytes: 24 * GiB }), await planJob(req, { budgetBytes: 16 * GiB })];
    const forced = await planJob(req, { imageTextResidency: 'resident' });
    assert.deepEqual(full.stages, forced.stages, 'auto at the default budget is resident, byte for byte');
    assert.deepEqual([full.offload.policy, full.offload.host_to_gpu_bytes_per_job, full.fits], ['resident', 0, true]);
    const text = full.resident.find((r) => r.stage === STAGE.loadTextEncoder)!.bytes;
    assert.ok(full.peak_gpu_bytes > 24 * GiB, 'resident, imgmain 1K needs more than a 24 GiB card');
    assert.deepEqual([b24.offload.policy, b24.offload.streamed, b24.fits], ['text-encoder-offloaded', [], true]);
    assert.ok(b24.peak_gpu_bytes <= 24 * GiB && Math.abs(b24.offload.host_to_gpu_bytes_per_job - text) < 0.01 * text, 'the encoder uploaded once a job');
    assert.ok(b24.stages.find((s) => s.stage === STAGE.sample)!.peak_gpu_bytes < full.stages.find((s) => s.stage === STAGE.sample)!.peak_gpu_bytes - text + GiB);
    assert.deepEqual([b16.offload.policy, b16.offload.streamed, b16.fits], ['text-encoder-streamed', ['text_encoder_layers'], true]);
    assert.ok(b16.peak_gpu_bytes <= 16 * GiB && b16.offload.host_to_gpu_bytes_per_job > 0.8 * text, 'the layers uploaded while encoding');
    assert.deepEqual([b16.flops, b16.dispatches], [full.flops, full.dispatches], 'the same work wherever the weights wait');
  });

  // the image DiT's block streaming (models/common/block-stream.ts): Krea 2 Turbo 16-bit holds a 24.84 GiB DiT and VAE,
  // so no 24 GiB budget held it whole; its blocks streamed, it fits 24 and 16 GiB (the text encoder stays: 11.73 GiB),
  // the same work, every block uploaded once a step
  test('imgart_turbo (16-bit) at 1K fits 24 GiB and 16 GiB with its DiT blocks streamed', async () => {
    const req = { prompt: 'a red kite over the sea', profile: 'imgart_turbo', size: '1024x1024', seed: 1 };
    const [b24, b16] = [await planJob(req, { budgetBytes: 24 * GiB }), await planJob(req, { budgetBytes: 16 * GiB })];
    assert.ok(turbo.peak_gpu_bytes > 24 * GiB, 'resident, it needs more than 24 GiB');
    assert.deepEqual([b24.offload.policy, b24.offload.streamed, b24.fits], ['blocks-streamed', ['transformer_blocks'], true]);
    assert.deepEqual([b16.offload.policy, b16.fits], ['blocks-streamed', true]);
    assert.ok(b24.peak_gpu_bytes <= 24 * GiB && b16.peak_gpu_bytes <= 16 * GiB);
    assert.equal(b24.offload.host_to_gpu_bytes_per_step, b16.offload.host_to_gpu_bytes_per_step);
    const dit = turbo.resident.find((r) => r.stage === STAGE.loadModel)!.bytes;
    assert.ok(b24.offload.host_to_gpu_bytes_per_step > 0.85 * dit && b24.offload.host_to_gpu_bytes_per_step < dit, 'one forward a step uploads every block once');
    assert.deepEqual([b24.flops, b24.dispatches], [turbo.flops, turbo.dispatches], 'the same work wherever the blocks wait');
  });
});
