// The voices of a video job (audio_mode voice, 1 to 3 clips, with reference pictures: the Ref2VA partition) as
// upstream diffusers conditions an audio reference (docs/models/minimax-h3.md "Voices in the service"):
//   file -> float PCM at the rate the file carries (media decodeAudio at the probed rate: no resampling by ffmpeg;
//           mono duplicated, stereo kept, surround downmixed by ffmpeg to stereo)
//        -> MiniMaxH3Ref2VASetupStep._normalize_audio_condition (prepareVoice, golden voice_prep): truncated at its
//           own rate to int(frames / 24 x rate) samples, stereo, torchaudio's Resample to 32 kHz
//        -> MiniMaxH3Ref2VAReferenceEncoderStep's audio rows: the audio VAE encoder per channel, posterior mean,
//           (z - mean) / std, channel-major rows [2 T, 32], T = ceil(samples / 800) (audioConditionRows)
// The packed sequence takes each voice as an audio block after the picture blocks (references.ts: t = clock + k,
// w pinned to the target grid's extremes, timestep 1.0, clean), held through sampling and dropped before decoding.
// The text encoder sees "<Audio j>: " (presentation.ts ref2vaPresentation), never the waveform.
import { readFile } from 'node:fs/promises';
import { FPS } from '../../../catalog';
import { throwIfCancelled } from '../../../common/errors';
import type { Engine } from '../../../engine/engine';
import { decodeAudio, probeAudio } from '../../../media';
import { resampleKernel, torchaudioResample } from '../../common/torchaudio-resample';
import { audioConditionRows } from '../vae/audio';
import type { ReferenceBlock } from '../sequence/references';
import { TRACK_SAMPLE_RATE, withAudioVaeEncoder } from './track-inputs';

/** A voice as the audio VAE encoder takes it: two channels at 32 kHz. */
export interface Voice {
  channels: [Float32Array, Float32Array];
  sampleRate: number;
  /** The clip's rate and samples per channel as read, before the truncation and the resampling. */
  sourceRate: number;
  sourceSamples: number;
}

/** A voice's conditioning rows [2 T, C] (channel-major) and T, its latent frames per channel. */
export interface EncodedVoice {
  rows: Float32Array;
  latents: number;
}

/** Samples a voice keeps at its own rate for a `frames`-frame video: int(num_frames / fps x rate), as upstream. */
export function voiceSamples(frames: number, rate: number): number {
  return Math.trunc((frames / FPS) * rate);
}

/**
 * _normalize_audio_condition on 1 or 2 channels of a clip at `rate`: the first voiceSamples(frames, rate) samples,
 * a mono channel repeated, each channel resampled to `target` (torchaudio's kernel, shared by the channels).
 */
export function prepareVoice(channels: readonly Float32Array[], rate: number, frames: number, target = TRACK_SAMPLE_RATE): [Float32Array, Float32Array] {
  if (channels.length !== 1 && channels.length !== 2) throw new RangeError(`prepareVoice: ${channels.length} channels (mono or stereo)`);
  const keep = voiceSamples(frames, rate);
  const cut = channels.map((c) => c.subarray(0, Math.min(keep, c.length)));
  const stereo = cut.length === 2 ? cut : [cut[0]!, cut[0]!];
  if (rate === target) return [Float32Array.from(stereo[0]!), Float32Array.from(stereo[1]!)];
  const kernel = resampleKernel(rate, target);
  const left = torchaudioResample(stereo[0]!, rate, target, kernel);
  const right = stereo[1] === stereo[0] ? Float32Array.from(left) : torchaudioResample(stereo[1]!, rate, target, kernel);
  return [left, right];
}

/** Reads the clips (labelled audios[i]) at their own rates and prepares each for a `frames`-frame video. */
export async function readVoices(paths: readonly string[], frames: number, signal?: AbortSignal): Promise<Voice[]> {
  const out: Voice[] = [];
  for (const [i, path] of paths.entries()) {
    const label = `audios[${i}]`;
    const buf = await readFile(path);
    // the rate the container reports (upstream's PyAV decode keeps it): ffmpeg then resamples nothing
    const rate = (await probeAudio(buf, label, { signal })).sampleRate;
    const d = await decodeAudio(buf, { label, sampleRate: rate, channels: 2, signal });
    const n = d.shape[1];
    const stereo = [d.data.subarray(0, n), d.data.subarray(n, 2 * n)];
    out.push({ channels: prepareVoice(stereo, rate, frames), sampleRate: TRACK_SAMPLE_RATE, sourceRate: rate, sourceSamples: n });
    throwIfCancelled(signal);
  }
  return out;
}

/** Each voice's conditioning rows, with the checkpoint's audio VAE encoder (audio_vae/) loaded for them and freed. */
export async function encodeVoices(e: Engine, audioVaeDir: string, voices: readonly Voice[], signal?: AbortSignal): Promise<EncodedVoice[]> {
  if (!voices.length) return [];
  return withAudioVaeEncoder(e, audioVaeDir, async (encoder, cfg) => {
    const out: EncodedVoice[] = [];
    for (const v of voices) {
      const p = await encoder.encode(v.channels);
      out.push({ rows: audioConditionRows(cfg, p), latents: p.frames });
      throwIfCancelled(signal);
    }
    return out;
  });
}

/** The packed sequence's audio blocks of the encoded voices, in request order. */
export function voiceBlocks(voices: readonly EncodedVoice[]): ReferenceBlock[] {
  return voices.map((v) => ({ kind: 'audio', audioLatents: v.latents }));
}

/** The voices' rows one after the other: the leading audio rows of the packed sequence. */
export function voiceRows(voices: readonly EncodedVoice[]): Float32Array {
  const out = new Float32Array(voices.reduce((s, v) => s + v.rows.length, 0));
  let off = 0;
  for (const v of voices) {
    out.set(v.rows, off);
    off += v.rows.length;
  }
  return out;
}
