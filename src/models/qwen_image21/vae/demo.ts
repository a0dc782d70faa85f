// The checkpoint format of vae/ (every key of AutoencoderKLQwenImage21's state dict with its shape, from the
// config) and a writer of a random VAE in that format: the embedded demo checkpoint and loading tests use it.
// Keys the one-frame path never reads are listed too (upsampler / downsampler time_conv), as the real file has them.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { writeSafetensors, type WriteTensor } from '../../../engine/safetensors-writer';
import { decoderLevels, decoderMidDim, encoderLevels, encoderMidDim, parseQwenImage21VaeConfig, QWEN_IMAGE21_VAE_DEFAULTS } from './config';
import { VAE_WEIGHTS } from './vae';

/** The released latents_mean / latents_std (the class defaults of AutoencoderKLQwenImage21, 64 channels). */
export const QWEN_IMAGE21_LATENTS_MEAN = [
  0.5126, 0.7721, -0.0631, 1.3506, -0.7855, -2.1025, -0.3458, 1.3722, 1.8873, -1.7177, -0.651, 0.2732, 0.7562, -0.6163, -1.0277, 3.8363,
  2.021, 0.0472, 0.932, 2.0087, 2.4954, -0.1391, -1.4249, 1.8464, -0.5236, 1.2826, 3.7046, -1.3035, 2.7286, -1.4518, -1.9036, -1.9955,
  -0.0342, -1.0265, -0.7636, 3.0555, 0.0746, -3.0751, -0.1076, 1.7376, -1.0914, -1.9435, -0.2784, -1.368, 0.4809, -0.4433, 0.3764, 0.5729,
  -2.0595, 1.096, -1.326, -2.0211, -5.0179, 0.5275, 4.0162, 1.8505, 0.3026, 1.9373, 1.4937, 0.2632, 0.5547, -1.7121, -0.1562, 0.0304,
];
export const QWEN_IMAGE21_LATENTS_STD = [
  3.2001, 3.2936, 3.4321, 3.0091, 3.1061, 4.0379, 4.0705, 3.791, 3.0785, 3.65, 3.9308, 3.0904, 2.8778, 3.7675, 3.732, 5.0756,
  3.2864, 4.0397, 3.1317, 4.0443, 2.9249, 3.9454, 3.0988, 4.2489, 3.4896, 3.8513, 3.9323, 3.4719, 3.7498, 4.283, 3.5694, 4.2467,
  3.9037, 3.2947, 5.077, 3.5075, 3.27, 3.4767, 2.8063, 5.1125, 3.5327, 4.7833, 3.1286, 4.1819, 3.8527, 3.8312, 3.5605, 4.3875,
  3.9624, 4.0168, 3.5643, 4.055, 5.5614, 4.2963, 4.408, 3.4959, 3.8747, 3.7608, 3.5735, 3.149, 3.7662, 3.6746, 3.4563, 3.8161,
];

/** A tiny VAE of the real structure (z_dim 64 so the released latent statistics apply): widths 4 instead of 96 / 144. */
export const DEMO_VAE_CONFIG: Record<string, unknown> = {
  _class_name: 'AutoencoderKLQwenImage21',
  ...QWEN_IMAGE21_VAE_DEFAULTS,
  base_dim: 4,
  decoder_base_dim: 4,
  latents_mean: QWEN_IMAGE21_LATENTS_MEAN,
  latents_std: QWEN_IMAGE21_LATENTS_STD,
};

/** Every state-dict key of the VAE with its PyTorch shape. */
export function vaeCheckpointShapes(rawConfig: Record<string, unknown>): Map<string, number[]> {
  const c = parseQwenImage21VaeConfig(rawConfig);
  const m = new Map<string, number[]>();
  const conv = (p: string, cin: number, cout: number, k: number) => {
    m.set(`${p}weight`, [cout, cin, k, k]);
    m.set(`${p}bias`, [cout]);
  };
  const norm = (p: string, ch: number, images = false) => m.set(`${p}gamma`, images ? [ch, 1, 1] : [ch, 1, 1, 1]);
  const resnet = (p: string, cin: number, cout: number) => {
    norm(`${p}norm1.`, cin);
    conv(`${p}conv1.`, cin, cout, 3);
    norm(`${p}norm2.`, cout);
    conv(`${p}conv2.`, cout, cout, 3);
    if (cin !== cout) conv(`${p}conv_shortcut.`, cin, cout, 1);
  };
  const mid = (p: string, ch: number) => {
    resnet(`${p}resnets.0.`, ch, ch);
    norm(`${p}attentions.0.norm.`, ch, true);
    conv(`${p}attentions.0.to_qkv.`, ch, 3 * ch, 1);
    conv(`${p}attentions.0.proj.`, ch, ch, 1);
    resnet(`${p}resnets.1.`, ch, ch);
  };
  const enc = encoderLevels(c);
  conv('encoder.conv_in.', c.inChannels, enc[0]!.inDim, 3);
  for (const [i, l] of enc.entries()) {
    const p = `encoder.down_blocks.${i}.`;
    for (let r = 0; r < c.numResBlocks; r++) resnet(`${p}resnets.${r}.`, r === 0 ? l.inDim : l.outDim, l.outDim);
    if (l.down) {
      conv(`${p}downsampler.resample.1.`, l.outDim, l.outDim, 3);
      if (l.temporal) conv(`${p}downsampler.time_conv.`, l.outDim, l.outDim, 1);
    }
  }
  mid('encoder.mid_block.', encoderMidDim(c));
  norm('encoder.norm_out.', encoderMidDim(c));
  conv('encoder.conv_out.', encoderMidDim(c), 2 * c.zDim, 3);
  conv('quant_conv.', 2 * c.zDim, 2 * c.zDim, 1);
  conv('post_quant_conv.', c.zDim, c.zDim, 1);
  conv('decoder.conv_in.', c.zDim, decoderMidDim(c), 3);
  mid('decoder.mid_block.', decoderMidDim(c));
  const dec = decoderLevels(c);
  for (const [i, l] of dec.entries()) {
    const p = `decoder.up_blocks.${i}.`;
    for (let r = 0; r <= c.numResBlocks; r++) resnet(`${p}resnets.${r}.`, r === 0 ? l.inDim : l.outDim, l.outDim);
    if (l.up) {
      conv(`${p}upsampler.resample.1.`, l.outDim, l.outDim, 3);
      if (l.temporal) conv(`${p}upsampler.time_conv.`, l.outDim, 2 * l.outDim, 1);
    }
  }
  norm('decoder.norm_out.', dec.at(-1)!.outDim);
  conv('decoder.conv_out.', dec.at(-1)!.outDim, c.outChannels, 3);
  return m;
}

export interface DemoVaeOptions {
  /** config.json overrides on DEMO_VAE_CONFIG (e.g. other widths); must keep a buildable structure. */
  config?: Record<string, unknown>;
  seed?: number;
  /** Stored dtype (the released file is bf16; default F32). */
  dtype?: 'F32' | 'F16' | 'BF16';
}

/** mulberry32: a small deterministic generator for the demo weights. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * Writes `dir`/config.json and `dir`/diffusion_pytorch_model.safetensors: a random VAE with the real keys.
 * Conv weights ~ U(+-sqrt(3 / fan_in)) (unit variance per output), biases ~ U(+-0.1), gammas 1 (as initialised upstream).
 */
export async function writeDemoVae(dir: string, opts: DemoVaeOptions = {}): Promise<Record<string, unknown>> {
  const config = { ...DEMO_VAE_CONFIG, ...opts.config };
  const rand = rng(opts.seed ?? 0x5eed);
  const dtype = opts.dtype ?? 'F32';
  const tensors: Record<string, WriteTensor> = {};
  for (const [key, shape] of vaeCheckpointShapes(config)) {
    const n = shape.reduce((a, b) => a * b, 1);
    const data = new Float32Array(n);
    if (key.endsWith('gamma')) data.fill(1);
    else if (key.endsWith('bias')) for (let i = 0; i < n; i++) data[i] = (rand() * 2 - 1) * 0.1;
    else {
      const bound = Math.sqrt(3 / (n / shape[0]!));
      for (let i = 0; i < n; i++) data[i] = (rand() * 2 - 1) * bound;
    }
    tensors[key] = { dtype, shape, data };
  }
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'config.json'), `${JSON.stringify(config, null, 2)}\n`);
  await writeSafetensors(join(dir, VAE_WEIGHTS), tensors);
  return config;
}
