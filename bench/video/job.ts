// npm run bench:video -- --job [--root DIR] [--profile basevid50] [--references N] [--voices M] [--cases 352p:1]
//                        [--aspect 16:9] [--steps N] [--runs R] [--picture-sizes WxH,..]
// One whole reference job (image_mode reference with N pictures, audio_mode voice with M voices; default 3 + 1)
// through the service's MiniMaxH3Pipeline, as the GPU worker runs it: the Ref2VA partition swapped in, the pictures
// decoded and put on their canvases, the voices read, resampled and encoded, the text stage, sampling, both decoders,
// x264 + AAC. Checkpoint: a folder in the published diffusers layout (--root: transformer/, transformer_ref/,
// text_encoder/, tokenizer/, vae/, audio_vae/), else the demo checkpoint generated once into $DEMO_WEIGHTS_DIR (default
// data/demo-weights, where the service puts it). Prints each stage's wall time (the run context's stages, a stage set
// again right after itself counted once: the first run's 加载模型 is the FL2VA load and the Ref2VA swap), GPU bytes in
// use at its end and the pool's running peak there (the pool keeps one peak since the engine started: a stage whose
// figure rose set it), and under each stage the pipeline's trace events in it (the time since the previous one: e.g.
// 'references encoded' is the video VAE encoder's load + the pictures). --runs R runs the same job R times (from the second, the model is loaded).
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import sharp from 'sharp';
import { snapFrames, VIDEO_SIZES, type Stage } from '../../src/catalog';
import { Engine } from '../../src/engine/engine';
import { wavHeader } from '../../src/media/wav';
import type { RunContext } from '../../src/models/common/pipeline';
import { DEMO_ADAPTERS, DEMO_REF_ADAPTERS, planDemoH3 } from '../../src/models/minimax_h3/demo';
import { h3DirsFromRoot, MiniMaxH3Pipeline, type H3Task } from '../../src/models/minimax_h3/pipeline';
import { h3Variant, loadH3Transformer } from '../../src/models/minimax_h3/variants';
import { ensureDemoCheckpoint } from '../../src/weights';
import { checkSpec, parseSizes } from './references';

const fmt = (ms: number) => (ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${ms.toFixed(1)} ms`);
const gib = (b: number) => `${(b / 2 ** 30).toFixed(3)} GiB`;

/** A 16-bit mono wav at `rate`: a voice-like tone with a little noise (values do not matter for the timing). */
function voiceWav(path: string, seconds: number, rate: number): void {
  const n = Math.round(seconds * rate);
  const data = Buffer.alloc(n * 2);
  for (let i = 0; i < n; i++) data.writeInt16LE(Math.round(6000 * Math.sin((2 * Math.PI * 220 * i) / rate) * (1 + 0.3 * Math.sin(i / 900)) + ((i * 7919) % 997) - 498), i * 2);
  writeFileSync(path, Buffer.concat([wavHeader(rate, 1, n), data]));
}

/** A width x height PNG with a gradient and a block (a picture with some structure; the model's output is noise). */
async function picturePng(path: string, width: number, height: number, seed: number): Promise<void> {
  const px = Buffer.alloc(width * height * 3);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const o = (y * width + x) * 3;
      const inBlock = Math.abs(x - width / 2) < width / 6 && Math.abs(y - height / 2) < height / 5;
      px[o] = inBlock ? 40 : (255 * x) / width;
      px[o + 1] = inBlock ? 200 : (255 * y) / height;
      px[o + 2] = (seed * 80) % 256;
    }
  }
  writeFileSync(path, await sharp(px, { raw: { width, height, channels: 3 } }).png().toBuffer());
}

interface Segment {
  stage: Stage;
  start: number;
  end: number;
  inUse: number;
  peak: number;
  /** The pipeline's trace events inside the stage ('references encoded', 'voices encoded', ...): time, bytes in use. */
  events: { event: string; at: number; inUse: number }[];
}

export async function runJob(args: readonly string[]): Promise<void> {
  const arg = (name: string) => {
    const i = args.indexOf(name);
    return i >= 0 ? args[i + 1] : undefined;
  };
  const profile = h3Variant(arg('--profile') ?? 'basevid50');
  const spec = { pictures: Number(arg('--references') ?? 3), voices: Number(arg('--voices') ?? 1), pictureSizes: parseSizes(arg('--picture-sizes')) };
  checkSpec(spec);
  const [caseSpec] = (arg('--cases') ?? '480p:5').split(',');
  const [res, sec] = caseSpec!.split(':');
  const aspect = arg('--aspect') ?? '16:9';
  const size = VIDEO_SIZES[aspect]?.[res!];
  if (!size || !(Number(sec) > 0)) throw new Error(`--cases: "${caseSpec}" must be one <res>:<seconds> with res one of ${Object.keys(VIDEO_SIZES[aspect] ?? {}).join(', ')}`);
  const [width, height] = size;
  const frames = snapFrames(Number(sec));
  const steps = Number(arg('--steps') ?? profile.steps);
  const runs = Number(arg('--runs') ?? 1);

  const e = await Engine.create({ allowSoftware: true });
  const d = e.describe();
  const dir = mkdtempSync(join(tmpdir(), 'kiln-bench-job-'));
  try {
    let root = arg('--root');
    let t0 = performance.now();
    if (!root) {
      const plan = await planDemoH3(e);
      root = await ensureDemoCheckpoint({ name: 'minimax-h3', version: plan.version, root: resolve(process.env.DEMO_WEIGHTS_DIR ?? 'data/demo-weights'), generate: plan.write });
      console.log(`demo checkpoint ${root} ready in ${fmt(performance.now() - t0)}`);
    }
    console.log(`adapter: ${d.name} (${d.vendor}/${d.architecture}, ${d.backend}${d.software ? ', software' : ''})`);
    console.log(`date: ${new Date().toISOString()}  job: ${profile.name} on ${root}, ${res} ${sec} s (${width}x${height}, ${frames} frames), ${steps} steps, ${spec.pictures} reference picture(s) + ${spec.voices} voice(s)`);

    const images: string[] = [];
    for (let i = 0; i < spec.pictures; i++) {
      const [w, h] = spec.pictureSizes?.[i % spec.pictureSizes.length] ?? [width, height];
      images.push(join(dir, `picture${i + 1}.png`));
      await picturePng(images[i]!, w, h, i);
    }
    // voices at 24 kHz (resampled to 32 kHz by the pipeline, as most voice files are), the video's length + 1 s, >= 3 s
    const audios = Array.from({ length: spec.voices }, (_, i) => join(dir, `voice${i + 1}.wav`));
    audios.forEach((p) => voiceWav(p, Math.max(3, frames / 24 + 1), 24000));
    mkdirSync(join(dir, 'out'));

    let segments: Segment[] = [];
    const pipeline = new MiniMaxH3Pipeline({
      engine: async () => e,
      dirs: async () => h3DirsFromRoot(root!),
      // a distilled or turbo profile merges its Ref2VA adapter, kept where the demo layout keeps it (also under --root)
      loadTransformer: (eng, dirs, o) => loadH3Transformer(eng, profile, {
        transformer: dirs.transformer, transformerRef: dirs.transformerRef,
        adapter: profile.adapter ? join(root!, DEMO_ADAPTERS[profile.adapter]) : undefined,
        refAdapter: profile.references.adapter ? join(root!, DEMO_REF_ADAPTERS[profile.references.adapter]) : undefined,
      }, { dtype: o.dtype, partition: o.partition }),
      textEncoderInt8: profile.weights === 'int8',
      sampler: profile.stepCache ? { stepCache: profile.stepCache } : undefined,
      trace: (event, { inUseBytes }) => segments.at(-1)?.events.push({ event, at: performance.now(), inUse: inUseBytes }),
    });
    try {
      for (let r = 0; r < runs; r++) {
        segments = [];
        const close = () => {
          const s = segments.at(-1);
          if (!s) return;
          const m = e.pool.stats();
          Object.assign(s, { end: performance.now(), inUse: m.inUseBytes, peak: m.peakInUseBytes });
        };
        const ctx: RunContext = {
          signal: new AbortController().signal,
          stage: (stage) => {
            if (segments.at(-1)?.stage === stage) return;
            close();
            segments.push({ stage, start: performance.now(), end: 0, inUse: 0, peak: 0, events: [] });
          },
          progress: () => {},
          safePoint: async () => {},
        };
        const task: H3Task = {
          prompt: 'a woman and a fox talk on a beach at sunset', seed: 7 + r, steps, width, height, frames,
          images, imageMode: 'reference', audios, audioMode: 'voice', outputPath: join(dir, 'out', `job${r}.mp4`),
        };
        t0 = performance.now();
        await pipeline.run(task, ctx);
        await e.sync();
        close();
        const total = performance.now() - t0;
        console.log(`run ${r + 1}/${runs}${r ? ' (model loaded)' : ''}: ${fmt(total)} in all; peak ${gib(e.pool.stats().peakInUseBytes)}`);
        for (const s of segments) {
          console.log(`  ${s.stage}  ${fmt(s.end - s.start)}  in use ${gib(s.inUse)} at its end, running peak ${gib(s.peak)}`);
          let last = s.start;
          for (const ev of s.events.filter((x) => !x.event.startsWith('step '))) {
            console.log(`    ${ev.event}  +${fmt(ev.at - last)}  in use ${gib(ev.inUse)}`);
            last = ev.at;
          }
        }
      }
    } finally {
      await pipeline.unload();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
    await e.shutdown();
  }
}
