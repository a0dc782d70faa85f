// Speech out: 16-bit PCM RIFF/WAVE, written atomically (temp sibling, then rename).
// The speech model produces mono float samples at 24 kHz; any rate and channel count is accepted.
import { writeFileAtomic } from './files';
import { interleave, sampleCount, type PcmAudio } from './types';

/** The speech model's output rate. */
export const SPEECH_SAMPLE_RATE = 24000;

/** A 44-byte canonical WAVE header for 16-bit PCM. */
export function wavHeader(sampleRate: number, channels: number, samplesPerChannel: number): Buffer {
  const dataBytes = samplesPerChannel * channels * 2;
  const h = Buffer.alloc(44);
  h.write('RIFF', 0, 'ascii');
  h.writeUInt32LE(36 + dataBytes, 4);
  h.write('WAVE', 8, 'ascii');
  h.write('fmt ', 12, 'ascii');
  h.writeUInt32LE(16, 16); // fmt chunk size
  h.writeUInt16LE(1, 20); // PCM
  h.writeUInt16LE(channels, 22);
  h.writeUInt32LE(sampleRate, 24);
  h.writeUInt32LE(sampleRate * channels * 2, 28); // byte rate
  h.writeUInt16LE(channels * 2, 32); // block align
  h.writeUInt16LE(16, 34); // bits per sample
  h.write('data', 36, 'ascii');
  h.writeUInt32LE(dataBytes, 40);
  return h;
}

/** Float samples to 16-bit little-endian PCM: clipped to [-1, 1], scaled by 32767, rounded. NaN becomes 0. */
export function floatToPcm16(samples: Float32Array): Buffer {
  const out = Buffer.alloc(samples.length * 2);
  for (let i = 0; i < samples.length; i++) {
    const v = samples[i];
    const c = v > 1 ? 1 : v < -1 ? -1 : v === v ? v : 0;
    out.writeInt16LE(Math.round(c * 32767), i * 2);
  }
  return out;
}

/** A complete 16-bit wav file in memory. */
export function encodeWav(audio: PcmAudio): Buffer {
  checkAudio(audio);
  const pcm = floatToPcm16(interleave(audio));
  return Buffer.concat([wavHeader(audio.sampleRate, audio.channels, sampleCount(audio)), pcm]);
}

export interface WriteWavOptions {
  signal?: AbortSignal;
}

/**
 * Writes `audio` to `path` as 16-bit PCM wav through a temp sibling and rename.
 * Speech: `{ data, sampleRate: SPEECH_SAMPLE_RATE, channels: 1, layout: 'planar' }`.
 * Throws CancelledError if `signal` fires (nothing is left behind); Error for malformed `audio` (a caller bug).
 */
export async function writeWav(path: string, audio: PcmAudio, opts: WriteWavOptions = {}): Promise<void> {
  checkAudio(audio);
  const pcm = floatToPcm16(interleave(audio));
  await writeFileAtomic(path, [wavHeader(audio.sampleRate, audio.channels, sampleCount(audio)), pcm], opts.signal);
}

function checkAudio(a: PcmAudio): void {
  if (!Number.isInteger(a.sampleRate) || a.sampleRate < 1000 || a.sampleRate > 384000) {
    throw new Error(`wav: sampleRate ${a.sampleRate} is not a plausible integer rate`);
  }
  if (!Number.isInteger(a.channels) || a.channels < 1 || a.channels > 8) throw new Error(`wav: channels ${a.channels} must be 1 to 8`);
  if (a.data.length % a.channels !== 0) {
    throw new Error(`wav: ${a.data.length} samples do not divide into ${a.channels} channels`);
  }
}
