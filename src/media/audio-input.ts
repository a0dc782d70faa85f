// Audio in: user clips (wav, mp3, m4a/aac, flac, ogg/opus/vorbis, webm/mkv, and the audio track of
// an mp4/mov) decoded by ffmpeg to float PCM at the rate and channel count the model asks for.
//
// The duration is the decoded sample count divided by the rate, not the container's header (which
// is an estimate for VBR mp3 and missing for raw streams). Limits are checked against it with a
// small tolerance (default 0.1 s), because lossy codecs pad their last frame: a clip cut at exactly
// 15 s decodes to 15.02 s as AAC at 48 kHz.
//
// Safety: the input is written to a private temp file (mp4s with the index at the end cannot be read
// from a pipe) and ffmpeg may only open that file (-protocol_whitelist file) with audio demuxers
// (-format_whitelist), so a playlist posing as audio cannot make ffmpeg read other files or URLs.
// Each run has a deadline; output beyond the limit is counted but not kept.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { BadInputError } from '../common/errors';
import { lastErrorLine, runFfmpeg, type FfmpegExit } from './ffmpeg';
import { withTempDir } from './files';
import { deinterleave, type PcmAudio } from './types';

/** Uploads larger than this are refused before decoding (30 s of 96 kHz 32-bit stereo wav is 23 MB). */
export const MAX_AUDIO_BYTES = 50 * 1024 * 1024;
const DEFAULT_TOLERANCE_S = 0.1;
const DEFAULT_TIMEOUT_MS = 30_000;
/** Demuxers ffmpeg may use (its names; "mov" covers mp4/m4a/3gp, "matroska" covers webm). */
const DEMUXERS = 'wav,w64,mp3,mov,aac,flac,ogg,matroska,aiff,caf';

export interface AudioLimits {
  minS: number;
  maxS: number;
  /** Slack allowed on both ends, for codec frame padding. Default 0.1 s. */
  toleranceS?: number;
}

/** What the upload was, from ffmpeg's stream listing, plus its exact decoded duration. */
export interface AudioProbe {
  /** Demuxer name, e.g. "mp3", "mov,mp4,m4a,3gp,3g2,mj2", "ogg", "wav". */
  container: string;
  /** e.g. "mp3", "aac", "opus", "pcm_s16le". */
  codec: string;
  sampleRate: number;
  /** Channel count of the source (from its layout: mono 1, stereo 2, 5.1 6, ...). */
  channels: number;
  durationS: number;
  bytes: number;
}

export interface DecodeAudioOptions {
  /** Names the input in error messages, e.g. `audios[0]` or `ref_audio`. */
  label: string;
  /** Output rate (ffmpeg resamples) and channel count, 1 or 2 (mono sources duplicated, stereo averaged, surround downmixed). */
  sampleRate: number;
  channels: number;
  /** If given, a clip outside [minS, maxS] is refused with its measured length. */
  limits?: AudioLimits;
  /** Default 'planar' (`shape [channels, samples]`). */
  layout?: 'planar' | 'interleaved';
  /** Deadline for ffmpeg, default 30 s. */
  timeoutMs?: number;
  signal?: AbortSignal;
}

export interface DecodedAudio extends PcmAudio {
  /** `[channels, samples]` */
  shape: [number, number];
  durationS: number;
  source: AudioProbe;
}

/**
 * Decodes an uploaded clip. Throws BadInputError naming `label` (not audio, no audio track, damaged,
 * too big, too slow to decode, outside `limits`), CancelledError on abort.
 */
export async function decodeAudio(buf: Buffer, opts: DecodeAudioOptions): Promise<DecodedAudio> {
  if (!Number.isInteger(opts.sampleRate) || opts.sampleRate < 1000) throw new Error(`decodeAudio: sampleRate ${opts.sampleRate} is not valid`);
  if (opts.channels !== 1 && opts.channels !== 2) throw new Error(`decodeAudio: channels ${opts.channels} must be 1 or 2`);
  const r = await decode(buf, opts.label, opts.sampleRate, opts.channels, opts.limits, true, opts.timeoutMs, opts.signal);
  const interleaved = r.samples!;
  const n = interleaved.length / opts.channels;
  const layout = opts.layout ?? 'planar';
  return {
    data: layout === 'planar' ? deinterleave(interleaved, opts.channels) : interleaved,
    sampleRate: opts.sampleRate,
    channels: opts.channels,
    layout,
    shape: [opts.channels, n],
    durationS: r.probe.durationS,
    source: r.probe,
  };
}

export interface ProbeAudioOptions {
  limits?: AudioLimits;
  timeoutMs?: number;
  signal?: AbortSignal;
}

/**
 * Validation-time check: format, codec, rate, channels and exact duration (the clip is decoded at
 * 16 kHz mono and the samples counted, not kept; tens of milliseconds for a 30 s clip).
 * Throws like decodeAudio.
 */
export async function probeAudio(buf: Buffer, label = 'audio', opts: ProbeAudioOptions = {}): Promise<AudioProbe> {
  return (await decode(buf, label, 16000, 1, opts.limits, false, opts.timeoutMs, opts.signal)).probe;
}

/** The 400 reason for a clip outside the limits, e.g. "audios[0]: clip is 1.62 s long; clips must be 2 to 15 s". */
export function clipLengthError(label: string, durationS: number, limits: AudioLimits): BadInputError {
  // Round away from the allowed range so 1.996 s reads "1.99 s", not "2.00 s".
  const shown = durationS < limits.minS ? Math.floor(durationS * 100) / 100 : Math.ceil(durationS * 100) / 100;
  return new BadInputError(`${label}: clip is ${shown.toFixed(2)} s long; clips must be ${limits.minS} to ${limits.maxS} s`);
}

async function decode(
  buf: Buffer,
  label: string,
  rate: number,
  channels: number,
  limits: AudioLimits | undefined,
  keep: boolean,
  timeoutMs = DEFAULT_TIMEOUT_MS,
  signal?: AbortSignal,
): Promise<{ probe: AudioProbe; samples?: Float32Array }> {
  if (buf.length === 0) throw new BadInputError(`${label}: the file is empty`);
  if (buf.length > MAX_AUDIO_BYTES) {
    throw new BadInputError(`${label}: audio file is ${(buf.length / 1048576).toFixed(1)} MB; at most ${MAX_AUDIO_BYTES / 1048576} MB is accepted`);
  }
  // Decoding keeps the source's mono or stereo (surround is downmixed to stereo by ffmpeg) and the
  // channel count asked for is made here: ffmpeg's own mono->stereo is 3 dB down per channel and its
  // stereo->mono sums at 0.707 (can clip); models expect duplication and the mean, as torchaudio does.
  // The probe path only counts samples, so it takes mono s16 directly.
  const sampleBytes = keep ? 4 : 2;
  const tol = limits?.toleranceS ?? DEFAULT_TOLERANCE_S;
  // Keep at most maxS + tolerance (+1 frame) of stereo; count up to 10x that (at least 600 s) before stopping
  // ffmpeg, so a 3-hour upload is measured cheaply and refused.
  const keepBytes = limits ? Math.ceil((limits.maxS + tol) * rate + 1) * 2 * sampleBytes : Infinity;
  const countBytes = limits ? Math.max(keepBytes * 10, 600 * rate * 2 * sampleBytes) : Infinity;
  const chunks: Buffer[] = [];
  let kept = 0;
  let total = 0;

  const exit = await withTempDir(async (dir) => {
    const file = join(dir, 'input');
    await writeFile(file, buf);
    // prettier-ignore
    const args = [
      '-protocol_whitelist', 'file', '-format_whitelist', DEMUXERS,
      '-i', file,
      '-map', '0:a:0', '-vn', '-sn', '-dn',
      ...(keep ? ['-af', 'aformat=channel_layouts=mono|stereo', '-c:a', 'pcm_f32le'] : ['-ac', '1', '-c:a', 'pcm_s16le']),
      '-ar', String(rate),
      '-f', keep ? 'f32le' : 's16le', 'pipe:1',
    ];
    return runFfmpeg(args, {
      timeoutMs,
      signal,
      onStdout: (chunk) => {
        total += chunk.length;
        if (keep && kept < keepBytes) {
          chunks.push(chunk);
          kept += chunk.length;
        }
        return total <= countBytes;
      },
    });
  });

  if (exit.end === 'spawn-error') throw new Error(`decodeAudio: ${lastErrorLine(exit.stderr)}`);
  const source = parseSource(exit.stderr);
  if (exit.end === 'timeout') throw new BadInputError(`${label}: decoding took longer than ${timeoutMs / 1000} s`);
  if (exit.end === 'stopped') {
    throw new BadInputError(`${label}: clip is longer than ${Math.floor(countBytes / (2 * sampleBytes) / rate)} s; clips must be ${limits!.minS} to ${limits!.maxS} s`);
  }
  if (exit.code !== 0) throw new BadInputError(describeDecodeFailure(label, exit));
  const decodedChannels = keep ? parseOutputChannels(exit.stderr) : 1;
  const frameBytes = decodedChannels * sampleBytes;
  const samplesPerChannel = Math.floor(total / frameBytes);
  if (samplesPerChannel === 0 || !source) throw new BadInputError(`${label}: the file contains no audio samples`);
  const durationS = samplesPerChannel / rate;
  const probe: AudioProbe = { ...source, durationS, bytes: buf.length };
  if (limits && (durationS < limits.minS - tol || durationS > limits.maxS + tol)) throw clipLengthError(label, durationS, limits);
  if (!keep) return { probe };

  // Concatenate into an aligned Float32Array (Buffer.concat's offset may not be a multiple of 4).
  const n = Math.min(samplesPerChannel, Math.floor(kept / frameBytes));
  const decoded = new Float32Array(n * decodedChannels);
  const bytes = new Uint8Array(decoded.buffer);
  let off = 0;
  for (const c of chunks) {
    const take = Math.min(c.length, bytes.length - off);
    bytes.set(c.subarray(0, take), off);
    off += take;
    if (off >= bytes.length) break;
  }
  return { probe, samples: remix(decoded, decodedChannels, channels) };
}

/** Interleaved `from`-channel samples to `to` channels (1 or 2): mono is duplicated, stereo averaged. */
function remix(src: Float32Array, from: number, to: number): Float32Array {
  if (from === to) return src;
  const n = src.length / from;
  const out = new Float32Array(n * to);
  if (from === 1 && to === 2) {
    for (let i = 0; i < n; i++) out[2 * i] = out[2 * i + 1] = src[i];
  } else if (from === 2 && to === 1) {
    for (let i = 0; i < n; i++) out[i] = 0.5 * (src[2 * i] + src[2 * i + 1]);
  } else {
    throw new Error(`remix: ${from} -> ${to} channels is not supported`);
  }
  return out;
}

/** Channel count of the decoded output stream (1 or 2 after aformat). */
function parseOutputChannels(stderr: string): number {
  const out = stderr.split(/\nOutput #0/)[1] ?? '';
  const m = /Audio: pcm_f32le[^,\n]*, \d+ Hz, (mono|stereo)/.exec(out);
  if (!m) throw new Error(`decodeAudio: cannot find the output stream in ffmpeg's listing: ${lastErrorLine(stderr)}`);
  return m[1] === 'mono' ? 1 : 2;
}

/** Input container and the first audio stream's codec, rate and channels, from ffmpeg's listing. */
export function parseSource(stderr: string): Omit<AudioProbe, 'durationS' | 'bytes'> | undefined {
  const input = stderr.split(/\nOutput #0/)[0];
  const container = /Input #0, (.+?), from /.exec(input)?.[1];
  const m = /Stream #0:\d+[^:]*: Audio: ([\w-]+)[^,\n]*, (\d+) Hz, ([^,\n]+)/.exec(input);
  if (!container || !m) return undefined;
  return { container, codec: m[1], sampleRate: Number(m[2]), channels: layoutChannels(m[3].trim()) };
}

function layoutChannels(layout: string): number {
  const named: Record<string, number> = { mono: 1, stereo: 2, '2.1': 3, '3.0': 3, quad: 4, '4.0': 4, '5.0': 5, '5.1': 6, '6.1': 7, '7.1': 8 };
  const base = layout.replace(/\(.*\)$/, '');
  return named[base] ?? (Number(/^(\d+) channels/.exec(layout)?.[1]) || 0);
}

function describeDecodeFailure(label: string, exit: FfmpegExit): string {
  const err = exit.stderr;
  if (/matches no streams|does not contain any stream/.test(err)) return `${label}: the file has no audio track`;
  if (/moov atom not found/.test(err)) return `${label}: the mp4/m4a file is incomplete (its index is missing; was the upload cut off?)`;
  if (/Invalid data found|not on whitelist|could not find codec parameters|Invalid argument|End of file/i.test(err)) {
    return `${label}: not a decodable audio file (wav, mp3, m4a, flac, ogg, webm or mp4 expected)`;
  }
  return `${label}: the audio could not be decoded (${lastErrorLine(err)})`;
}
