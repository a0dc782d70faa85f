// The MiniMax H3 pipeline (src/models/minimax_h3/pipeline.ts) end to end on the demo checkpoint (demo.ts), through the
// same loaders as real weights: a small job gives an H.264 mp4 of the job's size and frame count at 24 fps with a
// stereo 32 kHz AAC track; the stages come in the spec's order with progress per step; the text encoder is off the GPU
// before sampling, and later jobs rebuild it from host memory with the checkpoint folder gone; the same seed gives
// the same file and another seed another; cancel between steps leaves nothing.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { CancelledError } from '../../src/common/errors';
import type { Engine } from '../../src/engine/engine';
import { numelOf } from '../../src/engine/tensor';
import { STAGE } from '../../src/catalog';
import { planDemoH3, type H3DemoPlan } from '../../src/models/minimax_h3/demo';
import { DIFFUSERS_INDEX } from '../../src/models/minimax_h3/transformer/transformer';
import { audioRows, channelsFromRows, gaussianNoise, h3DirsFromRoot, MiniMaxH3Pipeline, type H3PipelineOptions, type H3ResidencyReport, type H3Task } from '../../src/models/minimax_h3/pipeline';
import { loadH3Transformer } from '../../src/models/minimax_h3/variants';
import type { RunContext } from '../../src/models/common/pipeline';
import { ensureDemoCheckpoint } from '../../src/weights';
import type { EngineHolder } from '../../src/engine/engine';
import { H3_PROFILE_NAMES, h3Variant } from '../../src/models/minimax_h3/variants';
import { checkProfile } from '../../src/weights';
import { realDirs, videoProfileEntry } from '../../src/worker/profiles/video';
import type { VideoTask as WorkerVideoTask } from '../../src/worker/protocol';
import { testEngine } from '../engine/helpers';
import { countVideoFrames, decodeAudioTrack, probe, rms } from '../media/helpers';

interface Recorded {
  events: string[];
  progress: [number, number][];
  safePoints: number;
}

function context(signal: AbortSignal = new AbortController().signal): { ctx: RunContext; rec: Recorded } {
  const rec: Recorded = { events: [], progress: [], safePoints: 0 };
  const ctx: RunContext = {
    signal,
    stage: (s) => {
      if (rec.events[rec.events.length - 1] !== s) rec.events.push(s);
    },
    progress: (v, m) => rec.progress.push([v, m]),
    safePoint: async () => {
      rec.safePoints++;
    },
  };
  return { ctx, rec };
}

/** A 96x64 22-frame clip, written to <out>/<id>.mp4. */
function task(out: string, over: Partial<H3Task> & { id?: string } = {}): H3Task {
  const { id = 'test', ...rest } = over;
  return { prompt: 'a cat sings "hello" in the rain', seed: 7, steps: 3, width: 96, height: 64, frames: 22, images: [], audios: [], outputPath: join(out, `${id}.mp4`), ...rest };
}

const sha = (p: string) => createHash('sha256').update(readFileSync(p)).digest('hex');

const dir = mkdtempSync(join(tmpdir(), 'kiln-h3-pipeline-'));
after(() => rmSync(dir, { recursive: true, force: true }));

describe('MiniMax H3 pipeline on the demo checkpoint', () => {
  let e: Engine;
  let plan: H3DemoPlan;
  let root: string;
  let out: string;
  const traces: { event: string; bytes: number }[] = [];
  const options = (): H3PipelineOptions => ({
    engine: async () => e,
    dirs: async () => h3DirsFromRoot(root),
    loadTransformer: (eng, dirs, o) => loadH3Transformer(eng, 'fastvid', { transformer: dirs.transformer }, { dtype: o.dtype }),
    trace: (event, info) => traces.push({ event, bytes: info.inUseBytes }),
  });
  let pipeline: MiniMaxH3Pipeline;

  before(async () => {
    e = await testEngine();
    plan = await planDemoH3(e);
    out = join(dir, 'out');
    mkdirSync(out);
    root = await ensureDemoCheckpoint({ name: 'minimax-h3', version: plan.version, root: join(dir, 'demo'), generate: plan.write });
    pipeline = new MiniMaxH3Pipeline(options());
  });

  test('the demo checkpoint is in the published format (sharded diffusers transformer and VAE, transformers text encoder)', () => {
    for (const f of ['model_index.json', 'scheduler/scheduler_config.json', 'audio_scheduler/scheduler_config.json', 'tokenizer/vocab.json', 'tokenizer/merges.txt',
      'transformer/config.json', 'text_encoder/config.json', 'text_encoder/model.safetensors.index.json', 'vae/config.json', 'audio_vae/config.json',
      'audio_vae/diffusion_pytorch_model.safetensors']) {
      assert.ok(existsSync(join(root, f)), f);
    }
    for (const part of ['transformer', 'vae']) {
      const index = JSON.parse(readFileSync(join(root, part, DIFFUSERS_INDEX), 'utf8')) as { weight_map: Record<string, string> };
      const shards = new Set(Object.values(index.weight_map));
      assert.ok(shards.size >= 2, `${part}: ${shards.size} shards`);
      for (const s of shards) assert.match(s, /^diffusion_pytorch_model-\d{5}-of-\d{5}\.safetensors$/);
      assert.deepEqual(new Set(Object.keys(index.weight_map)), new Set(plan.keys[part as 'transformer' | 'vae'].keys()));
    }
    // the text encoder holds what H3 reads: embed_tokens and layers 0..49 of 51
    const te = [...plan.keys.textEncoder.keys()];
    assert.ok(te.includes('model.language_model.layers.49.mlp.down_proj.weight'));
    assert.ok(!te.some((k) => k.includes('layers.50.') || k.endsWith('language_model.norm.weight')));
  });

  test('a job: stages in order, progress per step, mp4 with H.264 at the job size and frames and stereo 32 kHz AAC; the text encoder freed before sampling', async () => {
    const { ctx, rec } = context();
    traces.length = 0;
    await pipeline.load(ctx);
    const t = task(out);
    await pipeline.run(t, ctx);
    assert.deepEqual(rec.events, [STAGE.loadModel, STAGE.loadTextEncoder, STAGE.encode, STAGE.sample, STAGE.videoDecode, STAGE.audioDecode, STAGE.package, STAGE.save]);
    // fastvid counts model evaluations: steps 3 = 3 forwards, each reported (progress ends at the 3 asked for) and
    // followed by a safe point
    const sampling = rec.progress.filter(([, m]) => m === 3);
    assert.deepEqual(sampling, [[0, 3], [1, 3], [2, 3], [3, 3]]);
    assert.equal(rec.safePoints, 3);
    assert.deepEqual(rec.progress.at(-1), [22, 22], 'video decoding counts frames');

    const p = probe(t.outputPath);
    assert.equal(p.video?.codec, 'h264');
    assert.deepEqual([p.video?.width, p.video?.height, p.video?.fps], [96, 64, 24]);
    assert.equal(countVideoFrames(t.outputPath), 22);
    assert.equal(p.audio?.codec, 'aac');
    assert.equal(p.audio?.sampleRate, 32000);
    assert.equal(p.audio?.layout, 'stereo');
    const pcm = decodeAudioTrack(t.outputPath, 32000, 2);
    assert.ok(rms(pcm, { start: 0, stride: 2 }) > 1e-3 && rms(pcm, { start: 1, stride: 2 }) > 1e-3, 'both channels carry the generated sound');
    assert.deepEqual(readdirSync(out), ['test.mp4'], 'no temp file left');

    // text encoder: its weights come and go before the first step (embed_tokens stays on the host, read by rows)
    const at = (ev: string) => traces.find((x) => x.event === ev)!.bytes;
    const teParams = [...plan.keys.textEncoder].filter(([k]) => !k.endsWith('embed_tokens.weight')).reduce((a, [, s]) => a + numelOf(s), 0);
    const teBytes = at('text encoder loaded') - at('loaded');
    assert.ok(teBytes >= 2 * teParams, `text encoder took ${teBytes} bytes for ${teParams} parameters`);
    assert.ok(at('text encoder freed') - at('loaded') < teBytes / 4, 'freed after encoding');
    for (const s of traces.filter((x) => x.event.startsWith('step '))) assert.ok(s.bytes - at('loaded') < teBytes / 2, `${s.event}: ${s.bytes} bytes in use`);
  });

  test('later jobs upload the text encoder from host memory: text_encoder/ renamed away, the same file, the same GPU bytes', async () => {
    const first = traces.slice();
    assert.ok(pipeline.textEncoderHostBytes > 0, 'the first job kept the prepared weights on the host');
    const te = h3DirsFromRoot(root).textEncoder;
    renameSync(te, `${te}.away`);
    try {
      traces.length = 0;
      const t = task(out, { id: 'cached' }); // the first test's job again (seed 7), under another id
      await pipeline.run(t, context().ctx);
      assert.equal(sha(t.outputPath), sha(join(out, 'test.mp4')), 'the same clip as through the checkpoint');
    } finally {
      renameSync(`${te}.away`, te);
    }
    const bytes = (list: typeof traces, ev: string) => list.find((x) => x.event === ev)!.bytes;
    for (const ev of ['text encoder loaded', 'text encoder freed', 'sampling', 'saved']) assert.equal(bytes(traces, ev), bytes(first, ev), ev);
  });

  test('the same seed reproduces the file; another seed gives another', async () => {
    const a = task(out, { id: 'a', seed: 11 });
    const b = task(out, { id: 'b', seed: 11 });
    const c = task(out, { id: 'c', seed: 12 });
    for (const x of [a, b, c]) await pipeline.run(x, context().ctx);
    assert.equal(sha(a.outputPath), sha(b.outputPath));
    assert.notEqual(sha(a.outputPath), sha(c.outputPath));
  });

  for (const int8 of [false, true]) {
    test(`the DiT on the host while the text encoder runs, its blocks streamed while sampling${int8 ? ' (int8)' : ''}: the same file as resident`, async () => {
      const reports: H3ResidencyReport[] = [];
      // placed: the loader takes the policy's block placement (the worker's does) and loads for the job, so streamed
      // blocks load straight to host memory; else the pipeline loads ahead of any job, the blocks onto the GPU, and the
      // job moves them (Pipeline.load's next absent)
      const run = async (textResidency: 'resident' | 'host', blockOffload: 'off' | 'on', id: string, placed = false) => {
        const p = new MiniMaxH3Pipeline({
          ...options(), textResidency, blockOffload, textEncoderInt8: int8, onResidency: (r) => reports.push(r),
          loadTransformer: (eng, dirs, o) => loadH3Transformer(eng, 'fastvid', { transformer: dirs.transformer }, { dtype: o.dtype, int8, blocks: placed ? o.blocks : undefined }),
        });
        traces.length = 0;
        const t = task(out, { id });
        try {
          if (!placed) await p.load(context().ctx);
          await p.run(t, context().ctx);
        } finally {
          await p.unload();
        }
        return { file: sha(t.outputPath), traces: traces.slice() };
      };
      const at = (list: typeof traces, ev: string) => list.find((x) => x.event === ev)!.bytes;
      const resident = await run('resident', 'off', `resident-${int8}`);
      const host = await run('host', 'off', `host-${int8}`);
      const streamed = await run('host', 'on', `streamed-${int8}`);
      const placed = await run('host', 'on', `placed-${int8}`, true);
      assert.equal(host.file, resident.file, 'the same clip with the DiT on the host while encoding');
      assert.equal(streamed.file, resident.file, 'the same clip with the blocks streamed');
      assert.equal(placed.file, resident.file, 'the same clip with the blocks loaded straight to host memory');
      assert.deepEqual(reports.map((r) => [r.dit, r.reason, r.blocks]), [['resident', 'forced (resident)', 'resident'], ['host', 'forced (host)', 'resident'], ['host', 'forced (host)', 'streamed'], ['host', 'forced (host)', 'streamed']]);
      const [kept, moved, blocks, direct] = reports as [H3ResidencyReport, H3ResidencyReport, H3ResidencyReport, H3ResidencyReport];
      // loaded to the host: the load holds the DiT less its blocks (one block at a time passed through the GPU), and the
      // job runs as the streamed one did from there
      const off = at(streamed.traces, 'loaded') - at(placed.traces, 'loaded');
      assert.ok(off >= direct.blockHostBytes, `${off} pool bytes fewer once loaded for ${direct.blockHostBytes} bytes of blocks`);
      assert.deepEqual([direct.blockHostBytes, direct.hostToGpuBytes, direct.samplingHostToGpuBytes], [blocks.blockHostBytes, blocks.hostToGpuBytes, blocks.samplingHostToGpuBytes]);
      for (const ev of ['transformer on the host', 'text encoder loaded', 'sampling', 'saved']) assert.equal(at(placed.traces, ev), at(streamed.traces, ev), ev);
      assert.equal(kept.hostToGpuBytes, 0);
      assert.ok(moved.hostToGpuBytes > 0 && moved.hostToGpuBytes === moved.gpuToHostBytes, `${moved.hostToGpuBytes} bytes back`);
      // the encoder sits beside the VAEs alone: the DiT's pool bytes fewer than when resident
      const ditPool = at(resident.traces, 'text encoder loaded') - at(host.traces, 'text encoder loaded');
      assert.ok(ditPool >= moved.hostToGpuBytes, `${ditPool} pool bytes off the GPU for ${moved.hostToGpuBytes} of weights`);
      assert.equal(at(host.traces, 'sampling'), at(resident.traces, 'sampling'), 'sampling holds the same bytes');
      assert.deepEqual(host.traces.filter((x) => x.event.startsWith('transformer')).map((x) => x.event), ['transformer on the host', 'transformer back']);
      // the text encoder's size as the policy counts it is what it took on the GPU
      assert.equal(moved.textEncoderBytes, at(host.traces, 'text encoder loaded') - at(host.traces, 'transformer on the host'));
      // streamed: the blocks stay off the GPU (only the rest comes back after the encoder), every forward uploads them
      // all once (3 steps, 3 forwards) and each AdaLN table build once more
      assert.equal(kept.blocks, 'resident');
      assert.ok(blocks.blockHostBytes > 0 && blocks.blockHostBytes < moved.hostToGpuBytes, `${blocks.blockHostBytes} of ${moved.hostToGpuBytes} bytes in the blocks`);
      assert.equal(blocks.hostToGpuBytes, moved.hostToGpuBytes - blocks.blockHostBytes);
      assert.equal(blocks.forwards, 3);
      assert.ok(blocks.samplingHostToGpuBytes >= 4 * blocks.blockHostBytes && blocks.samplingHostToGpuBytes % blocks.blockHostBytes === 0, `${blocks.samplingHostToGpuBytes} uploaded`);
      assert.ok(at(streamed.traces, 'sampling') < at(host.traces, 'sampling'), 'fewer bytes held through sampling');
    });
  }

  for (const int8 of [false, true]) {
    test(`the text encoder's layers streamed from host memory while encoding${int8 ? ' (int8)' : ''}: the same file as resident, two layers on the GPU, the copy kept for the next job`, async () => {
      const reports: H3ResidencyReport[] = [];
      const make = (textLayers: 'resident' | 'streamed') => new MiniMaxH3Pipeline({
        ...options(), textResidency: 'resident', blockOffload: 'off', textLayers, textEncoderInt8: int8, onResidency: (r) => reports.push(r),
        loadTransformer: (eng, dirs, o) => loadH3Transformer(eng, 'fastvid', { transformer: dirs.transformer }, { dtype: o.dtype, int8 }),
      });
      const runOn = async (p: MiniMaxH3Pipeline, id: string) => {
        traces.length = 0;
        const t = task(out, { id });
        await p.run(t, context().ctx);
        return { file: sha(t.outputPath), traces: traces.slice() };
      };
      const whole = make('resident');
      const layered = make('streamed');
      try {
        const resident = await runOn(whole, `te-resident-${int8}`);
        await whole.unload(); // the same bytes in use around each job
        const first = await runOn(layered, `te-streamed-${int8}`);
        // the second job: the streamed layers from the kept host copy, the checkpoint folder gone
        const te = h3DirsFromRoot(root).textEncoder;
        renameSync(te, `${te}.away`);
        let again: Awaited<ReturnType<typeof runOn>>;
        try {
          again = await runOn(layered, `te-again-${int8}`);
        } finally {
          renameSync(`${te}.away`, te);
        }
        assert.equal(first.file, resident.file, 'the same clip with the layers streamed');
        assert.equal(again.file, resident.file, 'the same clip from the kept copy');
        assert.deepEqual(reports.map((r) => [r.textLayers, r.reason]), [['resident', 'forced (resident), text encoder layers forced (resident)'], ['streamed', 'forced (resident), text encoder layers forced (streamed)'], ['streamed', 'forced (resident), text encoder layers forced (streamed)']]);
        const [kept, streamed, later] = reports as [H3ResidencyReport, H3ResidencyReport, H3ResidencyReport];
        assert.equal(kept.textEncoderHostToGpuBytes, 0);
        // each job uploads every layer once; the host copy holds them all
        assert.ok(streamed.textEncoderHostToGpuBytes > 0 && streamed.textEncoderHostToGpuBytes === later.textEncoderHostToGpuBytes, `${streamed.textEncoderHostToGpuBytes} bytes a job`);
        assert.equal(layered.textEncoderHostBytes, streamed.textEncoderHostToGpuBytes);
        const at = (list: typeof traces, ev: string) => list.find((x) => x.event === ev)!.bytes;
        // loaded, the streamed encoder holds nothing on the GPU; the resident one holds its layers
        assert.equal(at(first.traces, 'text encoder loaded'), at(first.traces, 'loaded'));
        assert.ok(at(resident.traces, 'text encoder loaded') - at(resident.traces, 'loaded') >= streamed.textEncoderHostToGpuBytes);
        for (const ev of ['text encoder freed', 'sampling', 'saved']) assert.equal(at(first.traces, ev), at(resident.traces, ev), ev);
        for (const ev of ['text encoder loaded', 'text encoder freed', 'sampling']) assert.equal(at(again.traces, ev), at(first.traces, ev), ev);
      } finally {
        await whole.unload();
        await layered.unload();
      }
    });
  }

  test('cancel between steps: CancelledError, no output, no temp files', async () => {
    const ac = new AbortController();
    const { ctx, rec } = context(ac.signal);
    const t = task(out, { id: 'cancelled', steps: 4 });
    const inner = ctx.progress;
    ctx.progress = (v, m) => {
      inner(v, m);
      if (v === 1 && m === 4) ac.abort('interrupted');
    };
    await assert.rejects(pipeline.run(t, ctx), CancelledError);
    assert.ok(!rec.events.includes(STAGE.videoDecode), 'stopped while sampling');
    assert.ok(!readdirSync(out).some((f) => f.includes('cancelled')), readdirSync(out).join(', '));
    await pipeline.unload();
    assert.equal(pipeline.textEncoderHostBytes, 0, 'unload drops the host copy');
  });

  test('the six registered profiles run on the demo checkpoint (adapters merged, int8, step cache) and say so', async () => {
    const weightsDir = join(dir, 'no-weights');
    mkdirSync(weightsDir);
    const holder = { get: async () => e } as unknown as EngineHolder;
    for (const name of H3_PROFILE_NAMES) {
      const entry = videoProfileEntry(name, { weightsDir, demoWeightsDir: join(dir, 'demo'), demoVideo: 'random' }, holder);
      assert.deepEqual([entry.kind, entry.profile, entry.weights()], ['video', name, 'demo']);
      assert.match(entry.note!(), /^demo: a tiny random MiniMax H3 checkpoint \(generated, .*\); the video and its sound are noise\. Real weights: .*npm run weights -- pull /);
      const p = entry.create();
      const { ctx, rec } = context();
      await p.load(ctx);
      const t: WorkerVideoTask = {
        id: `profile-${name}`, kind: 'video', profile: name, images: [], audios: [], output: join(out, `profile-${name}.mp4`),
        params: { prompt: 'a cat sings', seed: 7, steps: 4, width: 64, height: 64, frames: 22, mode: 't2v', image_mode: 'keyframe', audio_mode: 'voice', tts_text: '', tts_ref_text: '', tts_language: 'Auto' },
      };
      await p.run(t, ctx);
      await p.unload();
      assert.equal(rec.events.at(-1), STAGE.save, name);
      assert.equal(countVideoFrames(t.output), 22, name);
      // steps 4 read as 4 whatever the profile counts: distilled weights run 4 forwards, the base release a 4-point
      // grid (3 forwards; its first point is the starting noise)
      const sampling = rec.progress.filter(([, m]) => m === 4).map(([v]) => v);
      assert.deepEqual(sampling, name.startsWith('basevid') ? [1, 2, 3, 4] : [0, 1, 2, 3, 4], `${name}: progress of the 4 steps`);
    }
  });

  test('real weights: the transformer from the profile\'s checkpoint folder, every other part from MiniMax-H3/', () => {
    const weightsDir = join(dir, 'layout');
    const fast = realDirs(h3Variant('fastvid'), checkProfile('fastvid', weightsDir));
    // the preferred variant (distilled-8step+ref2va): reference jobs run on the base release's transformer_ref/
    assert.deepEqual(fast, {
      transformer: join(weightsDir, 'MiniMax-H3-8step', 'transformer'),
      transformerRef: join(weightsDir, 'MiniMax-H3', 'transformer_ref'),
      textEncoder: join(weightsDir, 'MiniMax-H3', 'text_encoder'),
      tokenizer: join(weightsDir, 'MiniMax-H3', 'tokenizer'),
      vae: join(weightsDir, 'MiniMax-H3', 'vae'),
      audioVae: join(weightsDir, 'MiniMax-H3', 'audio_vae'),
    });
    assert.equal(realDirs(h3Variant('basevid50'), checkProfile('basevid50', weightsDir)).transformer, join(weightsDir, 'MiniMax-H3', 'transformer'));
  });

  test('noise: a pure function of (seed, stream), standard normal; audio rows are channel-major and invert', () => {
    const a = gaussianNoise(5, 0, 100_001);
    assert.deepEqual(a, gaussianNoise(5, 0, 100_001));
    assert.notDeepEqual(a.subarray(0, 64), gaussianNoise(5, 1, 64));
    assert.notDeepEqual(a.subarray(0, 64), gaussianNoise(6, 0, 64));
    const mean = a.reduce((s, v) => s + v, 0) / a.length;
    const variance = a.reduce((s, v) => s + (v - mean) ** 2, 0) / a.length;
    assert.ok(Math.abs(mean) < 0.01 && Math.abs(variance - 1) < 0.02, `mean ${mean}, variance ${variance}`);
    const x = Float32Array.from({ length: 2 * 3 * 5 }, (_, i) => i); // [2, 3, 5]
    const rows = audioRows(x, 2, 3, 5);
    assert.deepEqual([...rows.subarray(0, 3)], [0, 5, 10]); // channel 0, latent 0: the 3 features
    assert.deepEqual([...rows.subarray(15, 18)], [15, 20, 25]); // channel 1, latent 0
    assert.deepEqual(channelsFromRows(rows, 2, 3, 5), x);
  });
});
