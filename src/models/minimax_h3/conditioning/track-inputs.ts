// A soundtrack clip of a video job (audio_mode track) as the mp4's audio and as audio conditioning rows
// (docs/models/minimax-h3.md "Tracks in the service"):
//   file -> stereo float PCM at 32 kHz (media decodeAudio: ffmpeg's resampler, mono duplicated, surround downmixed)
//        -> cut or padded with silence to the video's length, round(frames / 24 * 32000) samples per channel:
//           this is the soundtrack the mp4 carries, unchanged
//        -> the audio VAE encoder per channel (posterior mean, (z - mean) / std: audioConditionRows), the latents
//           cropped to the target's audio latents (ComfyUI's AddGuide crops an audio guide to the remaining duration)
//        -> rows [2 * Na, 32], channel-major: the audio guide's rows, held at t = 1.0 (clean) by the sampler
// The encoder is loaded for the job and freed before sampling, as the video VAE encoder of keyframe jobs.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { FPS } from '../../../catalog';
import { throwIfCancelled } from '../../../common/errors';
import type { Engine } from '../../../engine/engine';
import { Checkpoint } from '../../../engine/safetensors';
import { decodeAudio } from '../../../media';
import { AudioVaeEncoder, audioConditionRows, parseAudioVaeEncoderConfig, type AudioPosterior, type AudioVaeEncoderConfig } from '../vae/audio';

/** The mp4's audio rate (service-api.md: AAC 32 kHz stereo), also the audio VAE's rate. */
export const TRACK_SAMPLE_RATE = 32000;

/** A prepared soundtrack: two channels of exactly the video's length at 32 kHz. */
export interface Track {
  channels: [Float32Array, Float32Array];
  sampleRate: number;
  /** Samples of the clip itself before the cut or the padding (per channel). */
  clipSamples: number;
}

/** Samples per channel of a `frames`-frame video at `rate`: the writer's own length (video-writer fitAudio). */
export function trackSamples(frames: number, rate = TRACK_SAMPLE_RATE): number {
  return Math.round((frames * rate) / FPS);
}

/** Planar stereo PCM [2, n] cut or zero-padded to `samples` per channel. */
export function fitTrack(planar: Float32Array, n: number, samples: number): [Float32Array, Float32Array] {
  if (planar.length !== 2 * n) throw new RangeError(`fitTrack: ${planar.length} values are not 2 x ${n}`);
  const keep = Math.min(n, samples);
  return [0, 1].map((c) => {
    const out = new Float32Array(samples); // zeros: the padding
    out.set(planar.subarray(c * n, c * n + keep));
    return out;
  }) as [Float32Array, Float32Array];
}

/** Reads the clip (labelled audios[0]) and fits it to a `frames`-frame video. */
export async function readTrack(path: string, frames: number, signal?: AbortSignal): Promise<Track> {
  const d = await decodeAudio(await readFile(path), { label: 'audios[0]', sampleRate: TRACK_SAMPLE_RATE, channels: 2, signal });
  throwIfCancelled(signal);
  const n = d.shape[1];
  return { channels: fitTrack(d.data, n, trackSamples(frames)), sampleRate: TRACK_SAMPLE_RATE, clipSamples: n };
}

/** The first `frames` latent frames of a posterior (an audio guide cropped to the target's length). */
export function cropPosterior(p: AudioPosterior, frames: number): AudioPosterior {
  if (frames > p.frames) throw new RangeError(`cropPosterior: ${frames} latent frames asked of ${p.frames}`);
  if (frames === p.frames) return p;
  const crop = (x: Float32Array) => {
    const C = x.length / p.frames;
    const out = new Float32Array(C * frames);
    for (let c = 0; c < C; c++) out.set(x.subarray(c * p.frames, c * p.frames + frames), c * frames);
    return out;
  };
  return { channels: p.channels, frames, mean: p.mean.map(crop), logs: p.logs.map(crop) };
}

/**
 * The track's audio conditioning rows [2 * latents, C] with the checkpoint's audio VAE encoder (audio_vae/), loaded
 * and freed here. `latents`: the target's audio latents per channel (the track's own latents are at least as many).
 */
export async function encodeTrack(e: Engine, audioVaeDir: string, track: Track, latents: number): Promise<Float32Array> {
  return withAudioVaeEncoder(e, audioVaeDir, async (encoder, cfg) => audioConditionRows(cfg, cropPosterior(await encoder.encode(track.channels), latents)));
}

/** Runs `fn` with the checkpoint's audio VAE encoder (audio_vae/; f32, as upstream pins the audio VAE), loaded for it
 * and freed after it, whatever happens. */
export async function withAudioVaeEncoder<T>(e: Engine, audioVaeDir: string, fn: (encoder: AudioVaeEncoder, cfg: AudioVaeEncoderConfig) => Promise<T>): Promise<T> {
  const cfgPath = join(audioVaeDir, 'config.json');
  const cfg = parseAudioVaeEncoderConfig(JSON.parse(await readFile(cfgPath, 'utf8')), cfgPath);
  const ckpt = await Checkpoint.open(join(audioVaeDir, 'diffusion_pytorch_model.safetensors'));
  let encoder: AudioVaeEncoder;
  try {
    encoder = await AudioVaeEncoder.load(e, ckpt, cfg);
  } finally {
    await ckpt.close();
  }
  try {
    return await fn(encoder, cfg);
  } finally {
    encoder.free();
  }
}
