// npm run bench:image [-- --profile imgmain|imgmain_bf16|both|imgart_turbo|imgart_turbo_int8|krea|all] [--layers N]
//                     [--sizes 1024,2048] [--job-size 1024] [--vae-size PX, 0: none] [--steps 25] [--prompt-tokens N]
//                     [--no-job] [--demo-sizes] [--lora-rank R]   (--sizes '' skips the step timings)
// The Krea 2 Turbo profiles (imgart_turbo*, krea = both of them) are krea2.ts's cases (8 steps unless --steps).
// Qwen-Image-2.1 at the real sizes (transformer: the class defaults = the reported config.json; text encoder: the
// reported Qwen3-VL-8B text config; VAE: the reported vae/config.json) with random weights made in memory
// (SyntheticCheckpoint + WeightSynth: nothing is written to disk), through the same loaders and the same denoising
// loop as the service (pipeline.ts sampleLatents). Per profile (imgmain: int8 transformer linears, imgmain_bf16:
// 16-bit), each in its own process on a fresh engine:
//   step @ size   one transformer step at that output size with the prompt's prefix K/V cached (what steps 2..N
//                 cost), best of 3 after the step that fills the cache (also printed)
//   job @ size    a whole job: prompt encode + `--steps` steps + VAE decode to pixels (read back), as the
//                 service runs it (png encode aside)
//   peak GPU      the engine pool's peak bytes in use over the profile's run (weights included)
// --layers N keeps the first N transformer blocks (of 32) and text-encoder layers (of 36): step time then scales
// about N/32; for slow adapters (lavapipe: also pass small --sizes and --job-size, e.g. 256).
import { spawnSync } from 'node:child_process';
import { Engine } from '../../src/engine/engine';
import { WeightSynth } from '../../src/models/common/random-weights';
import { SyntheticCheckpoint } from '../../src/models/common/synthetic-checkpoint';
import { parseQwen3Config } from '../../src/models/qwen3/config';
import { QWEN3_VL_IMAGE_PROCESSOR } from '../../src/models/qwen3_vl_vision';
import { parseQwenImage21Config, QWEN_IMAGE21_SCHEDULER, parseFlowMatchConfig } from '../../src/models/qwen_image21';
import { loadQwenImage21Parts, type QwenImage21Configs } from '../../src/models/qwen_image21/checkpoint';
import { latentGrid, sampleLatents, seededNoise, textSequence } from '../../src/models/qwen_image21/pipeline';
import { modelTimestep, flowMatchSchedule } from '../../src/models/qwen_image21/sigmas';
import { QWEN_IMAGE21_LATENTS_MEAN, QWEN_IMAGE21_LATENTS_STD, QWEN_IMAGE21_VAE_DEFAULTS, QwenImage21Vae } from '../../src/models/qwen_image21/vae';
import { benchKrea2, KREA2_BENCH_STEPS } from './krea2';

const args = process.argv.slice(2);
const arg = (name: string) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const PROFILE_SETS: Record<string, string[]> = {
  both: ['imgmain', 'imgmain_bf16'],
  krea: ['imgart_turbo', 'imgart_turbo_int8'],
  all: ['imgmain', 'imgmain_bf16', 'imgart_turbo', 'imgart_turbo_int8'],
};
const profiles = PROFILE_SETS[arg('--profile') ?? 'both'] ?? [arg('--profile')!];
const layersArg = arg('--layers');
const sizes = (arg('--sizes') ?? '1024,2048').split(',').filter(Boolean).map(Number);
const jobSize = Number(arg('--job-size') ?? 1024);
const vaeSize = Number(arg('--vae-size') ?? jobSize);
const steps = Number(arg('--steps') ?? 25);
const promptTokens = Number(arg('--prompt-tokens') ?? 64);
const job = !args.includes('--no-job');

const now = () => performance.now();
const fmt = (ms: number) => (ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${ms.toFixed(1)} ms`);
const gib = (b: number) => `${(b / 2 ** 30).toFixed(2)} GiB`;

/** The reported Qwen3-VL-8B text config (shared/upstream/README.md "qwen-image-2.1"). */
const TEXT_ENCODER_8B = {
  model_type: 'qwen3_vl',
  text_config: {
    model_type: 'qwen3_vl_text', hidden_size: 4096, intermediate_size: 12288, num_hidden_layers: 36, num_attention_heads: 32,
    num_key_value_heads: 8, head_dim: 128, rms_norm_eps: 1e-6, rope_theta: 5000000, vocab_size: 151936,
    rope_scaling: { mrope_interleaved: true, mrope_section: [24, 20, 20], rope_type: 'default' },
  },
};

/** The reported vae/config.json (the class defaults) with the released latent statistics. */
const REAL_VAE = { _class_name: 'AutoencoderKLQwenImage21', ...QWEN_IMAGE21_VAE_DEFAULTS, latents_mean: QWEN_IMAGE21_LATENTS_MEAN, latents_std: QWEN_IMAGE21_LATENTS_STD };

function configs(layers: number | undefined): QwenImage21Configs {
  const transformer = parseQwenImage21Config({});
  const textEncoder = parseQwen3Config(TEXT_ENCODER_8B, 'text');
  return {
    transformer: layers ? { ...transformer, numLayers: Math.min(layers, transformer.numLayers) } : transformer,
    textEncoder: layers ? { ...textEncoder, numLayers: Math.min(layers, textEncoder.numLayers) } : textEncoder,
    scheduler: parseFlowMatchConfig(QWEN_IMAGE21_SCHEDULER),
    vision: null, // text-to-image: the vision tower only runs for reference images
    processor: QWEN3_VL_IMAGE_PROCESSOR,
  };
}

/** A template-like id sequence: the system turn (14 tokens, dropped), the user turn with `n` ordinary BPE ids. */
function promptIds(n: number): number[] {
  const sys = [151644, 8948, 198, 1092, 30782, 323, 23643, 279, 3897, 9934, 13, 151645, 198, 151644];
  return [...sys, 872, 198, ...Array.from({ length: n }, (_, i) => 1000 + ((i * 7919) % 20000)), 151645, 198, 151644, 77091, 198];
}

async function benchProfile(profile: string): Promise<void> {
  const int8 = profile === 'imgmain';
  const cfg = configs(layersArg ? Number(layersArg) : undefined);
  const e = await Engine.create({ allowSoftware: true });
  try {
    const dtype = e.gpu.hasFeature('shader-f16') ? 'f16' : 'f32';
    const d = e.describe();
    console.log(`\nadapter: ${d.name} (${d.vendor}/${d.architecture}, ${d.backend}${d.software ? ', software' : ''})`);
    console.log(`## ${profile}: transformer ${cfg.transformer.numLayers}/32 blocks (${int8 ? 'int8' : dtype} linears), text encoder ${cfg.textEncoder.numLayers}/36 layers (${dtype}), compute ${dtype}`);
    // embed_tokens [151936, 4096] is one GPU tensor when it fits a binding; where it does not (lavapipe: 128 MiB) the
    // engine reads rows from the checkpoint file, which random weights do not have: keep the rows that fit instead
    // (only a few rows are gathered per prompt, so no timing changes).
    const bytes = dtype === 'f16' ? 2 : 4;
    const rows = Math.min(cfg.textEncoder.vocabSize, Math.floor(e.pool.maxBindingBytes / (cfg.textEncoder.hiddenSize * bytes)));
    if (rows < cfg.textEncoder.vocabSize) {
      console.log(`note: embed_tokens cut to ${rows} rows (ids taken modulo) to fit this adapter's ${e.pool.maxBindingBytes / 2 ** 20} MiB binding limit`);
      cfg.textEncoder = { ...cfg.textEncoder, vocabSize: rows };
    }
    const synth = new WeightSynth(1);
    const transformer = new SyntheticCheckpoint({ label: 'random transformer', dtype: 'F16', fill: synth.fill });
    const textEncoder = new SyntheticCheckpoint({ label: 'random text_encoder', dtype: 'F16', fill: synth.fill });
    let t0 = now();
    const vaeCkpt = new SyntheticCheckpoint({ label: 'random vae', dtype: 'F16', fill: synth.fill });
    const vae = await QwenImage21Vae.fromCheckpoint(e, vaeCkpt.checkpoint, REAL_VAE, { dtype, encoder: false });
    const parts = await loadQwenImage21Parts(e, { transformer: transformer.checkpoint, textEncoder: textEncoder.checkpoint }, cfg, { dtype, int8 }, null);
    await e.sync();
    console.log(`load: ${fmt(now() - t0)} (random weights made${int8 ? ', quantised' : ''} and uploaded), ${gib(e.pool.stats().inUseBytes)} on the GPU`);
    try {
      const ids = promptIds(promptTokens).map((id) => id % cfg.textEncoder.vocabSize);
      const cond2 = parts.textEncoder.encodeIds(ids, 14);
      const cond = cond2.reshape([1, cond2.shape[0]!, cond2.shape[1]!]);
      try {
        for (const size of sizes) {
          const { h, w } = latentGrid(size, size);
          const sequence = textSequence(cond.shape[1]!, h, w);
          const sched = flowMatchSchedule(cfg.scheduler, 25, sequence.targetLength);
          const x = e.upload(seededNoise(1, cfg.transformer.inChannels, h, w), [1, h * w, cfg.transformer.inChannels], parts.transformer.dtype);
          const cache = parts.transformer.createCache(sequence);
          try {
            const step = async (i: number) => {
              const s = now();
              parts.transformer.forward({ sequence, encoderHiddenStates: cond, latents: x, timestep: modelTimestep(sched, i), cache }).sample.free();
              await e.sync();
              return now() - s;
            };
            const first = await step(0);
            let best = Infinity;
            for (let i = 1; i <= 3; i++) best = Math.min(best, await step(i));
            console.log(`step @ ${size}x${size} (${h * w} image + ${sequence.prefixLength} prompt tokens): ${fmt(best)} (first step, prefix filled: ${fmt(first)})`);
          } finally {
            cache.free();
            x.free();
          }
        }
      } finally {
        cond2.free();
      }
      if (vaeSize > 0) {
        const { h, w } = latentGrid(vaeSize, vaeSize);
        const z = e.upload(seededNoise(2, cfg.transformer.inChannels, h, w), [1, h, w, cfg.transformer.inChannels], dtype);
        const decode = async () => {
          const s = now();
          const px = vae.decode(z);
          await e.read(px);
          px.free();
          return now() - s;
        };
        const first = await decode();
        console.log(`VAE decode @ ${vaeSize}x${vaeSize} (read back): ${fmt(await decode())} (first: ${fmt(first)})`);
        z.free();
      }
      if (job) {
        t0 = now();
        const c = parts.textEncoder.encodeIds(ids, 14);
        await e.sync();
        const encodeMs = now() - t0;
        const t1 = now();
        const latents = await sampleLatents(e, parts.transformer, cfg.scheduler, {
          cond: { embeds: c.reshape([1, c.shape[0]!, c.shape[1]!]) }, cfg: 1, seed: 1, steps, width: jobSize, height: jobSize,
        });
        const sampleMs = now() - t1;
        c.free();
        const { h, w } = latentGrid(jobSize, jobSize);
        const t2 = now();
        const pixels = vae.decode(latents.reshape([1, h, w, cfg.transformer.inChannels]));
        latents.free();
        await e.read(pixels);
        pixels.free();
        const decodeMs = now() - t2;
        console.log(`job @ ${jobSize}x${jobSize}, ${steps} steps: ${fmt(now() - t0)} (prompt ${fmt(encodeMs)}, sampling ${fmt(sampleMs)} = ${fmt(sampleMs / steps)} per step, VAE decode ${fmt(decodeMs)})`);
      }
      console.log(`peak GPU memory: ${gib(e.pool.stats().peakInUseBytes)} in use (${gib(e.pool.stats().peakAllocatedBytes)} allocated by the pool)`);
    } finally {
      parts.free();
      vae.free();
    }
  } finally {
    await e.shutdown();
  }
}

async function main(): Promise<void> {
  if (profiles.length > 1) {
    // One process per profile: a fresh engine each (peak memory per profile), and a second WebGPU device created in
    // the same process after the first was destroyed crashed Dawn here (segfault on lavapipe).
    for (const p of profiles) {
      const rest = args.filter((a, i) => a !== '--profile' && args[i - 1] !== '--profile');
      const r = spawnSync(process.execPath, [process.argv[1]!, ...rest, '--profile', p], { stdio: 'inherit' });
      if (r.status !== 0) throw new Error(`bench:image --profile ${p} exited with ${r.status ?? r.signal}`);
    }
    return;
  }
  if (profiles[0]!.startsWith('imgart')) {
    const kSteps = Number(arg('--steps') ?? KREA2_BENCH_STEPS);
    const demoSizes = args.includes('--demo-sizes');
    console.log(`date: ${new Date().toISOString()}  Krea 2 Turbo, random weights at the ${demoSizes ? 'demo' : 'real'} sizes; steps at ${sizes.join(', ')} px, job at ${jobSize} px, ${kSteps} steps, prompt ${promptTokens} tokens`);
    await benchKrea2({ profile: profiles[0]!, layers: layersArg ? Number(layersArg) : undefined, sizes, jobSize, steps: kSteps, promptTokens, job, demoSizes, loraRank: arg('--lora-rank') ? Number(arg('--lora-rank')) : undefined });
    return;
  }
  console.log(`date: ${new Date().toISOString()}  Qwen-Image-2.1, random weights at the real sizes; steps at ${sizes.join(', ')} px, job at ${jobSize} px, ${steps} steps, prompt ${promptTokens} tokens`);
  await benchProfile(profiles[0]!);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
