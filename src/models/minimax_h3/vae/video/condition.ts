// encode_vae_condition's host steps around the video VAE encoder (diffusers modular pipeline): the pixel
// normalisation before it, and after it the posterior draw (seed-42 noise), the float16 rounding and the latent
// normalisation that give the conditioning latents the packing takes.
import { f16BitsToF32, f32ToF16Bits } from '../../../../engine/dtype';
import { torchRandn } from '../../../common/torch-rng';
import type { VideoVaeEncoderConfig } from './config';
import { PIXEL_MEAN, PIXEL_STD } from './decoder';
import type { HostVideo } from './encoder';

/** encode_vae_condition's pixel step: uint8 values [3, F, H, W] -> (x / 255 - mean) / std per channel, in float32. */
export function normalizePixels(u8: HostVideo): HostVideo {
  const [C, F, H, W] = u8.shape;
  if (C !== 3) throw new RangeError(`video VAE encode: ${C} channels, expected RGB`);
  const plane = F * H * W;
  const out = new Float32Array(u8.data.length);
  for (let ch = 0; ch < 3; ch++) {
    const m = Math.fround(PIXEL_MEAN[ch]!);
    const s = Math.fround(PIXEL_STD[ch]!);
    for (let i = ch * plane; i < (ch + 1) * plane; i++) out[i] = Math.fround(Math.fround(Math.fround(u8.data[i]! / 255) - m) / s);
  }
  return { data: out, shape: u8.shape };
}

/**
 * The posterior draw of encode_vae_condition: z = mean + exp(0.5 clamp(logvar, -30, 20)) x noise in float32 (upstream
 * draws the noise with torch.Generator().manual_seed(42)); `noise` = null takes the posterior's mean (its mode).
 * moments [2C, T, h, w] -> [C, T, h, w].
 */
export function posteriorSample(cfg: VideoVaeEncoderConfig, moments: HostVideo, noise: Float32Array | null): HostVideo {
  const [M, T, h, w] = moments.shape;
  const C = cfg.latentChannels;
  if (M !== 2 * C) throw new RangeError(`video VAE: moments have ${M} channels, expected ${2 * C}`);
  const n = C * T * h * w;
  if (noise && noise.length !== n) throw new RangeError(`video VAE: ${noise.length} noise values for ${n} latents`);
  const out = moments.data.slice(0, n);
  if (noise) {
    for (let i = 0; i < n; i++) {
      const logvar = Math.min(20, Math.max(-30, moments.data[n + i]!));
      const std = Math.fround(Math.exp(Math.fround(0.5 * logvar)));
      out[i] = Math.fround(out[i]! + Math.fround(std * noise[i]!));
    }
  }
  return { data: out, shape: [C, T, h, w] };
}

/** encode_vae_condition's last step: z rounded to float16, then (z - latents_mean) / latents_std per channel (float32). */
export function normalizeSample(cfg: VideoVaeEncoderConfig, z: HostVideo): HostVideo {
  const [C, T, h, w] = z.shape;
  if (C !== cfg.latentChannels) throw new RangeError(`video VAE: ${C} latent channels, expected ${cfg.latentChannels}`);
  const n = T * h * w;
  const out = new Float32Array(z.data.length);
  for (let ch = 0; ch < C; ch++) {
    const lm = Math.fround(cfg.latentsMean[ch]!);
    const ls = Math.fround(cfg.latentsStd[ch]!);
    for (let i = ch * n; i < (ch + 1) * n; i++) out[i] = Math.fround(Math.fround(roundF16(z.data[i]!) - lm) / ls);
  }
  return { data: out, shape: z.shape };
}

/** encode_vae_condition's generator seed (components.keyframe_encode_seed). */
export const KEYFRAME_ENCODE_SEED = 42;

/**
 * The noise encode_vae_condition's posterior.sample draws for n latent values: torch.randn under a fresh generator
 * seeded 42 (torch-rng.ts: within a few float32 ulps of torch's own draw).
 */
export function conditionNoise(n: number): Float32Array {
  return torchRandn(KEYFRAME_ENCODE_SEED, n);
}

/** encode_vae_condition after the encoder: the conditioning latents [C, T, h, w] the packing takes. */
export function conditionLatents(cfg: VideoVaeEncoderConfig, moments: HostVideo, noise: Float32Array | null): HostVideo {
  return normalizeSample(cfg, posteriorSample(cfg, moments, noise));
}

/** A float32 value rounded to the nearest float16 (ties to even), as torch's .to(torch.float16). */
export const roundF16 = (x: number): number => f16BitsToF32(f32ToF16Bits(x));
