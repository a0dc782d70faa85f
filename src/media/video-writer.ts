// Video out: RGB frames and PCM audio become an mp4 (H.264 yuv420p, exactly 24 fps and the job's
// frame count, AAC stereo 32 kHz, +faststart).
//
// Two ffmpeg passes, both writing hidden temp siblings of the target:
//   1. encode: frames stream into ffmpeg's stdin as raw rgb24 while the model decodes them; each
//      writeFrame resolves once its bytes are handed to the pipe, so at most one frame waits in Node
//      and x264's lookahead bounds ffmpeg's memory (no temporary image files).
//   2. mux: the H.264 stream is copied, and the audio (padded/trimmed to frames/24 s in JS) goes in
//      through a second pipe (fd 3) as f32le, is resampled to 32 kHz and AAC-encoded; +faststart
//      moves the index to the front so browsers can play while downloading.
// Two passes because the pipeline decodes audio after the video frames (stage 视频解码 comes before
// 音频解码): audio can be given at open or at close. The copy pass costs well under a second.
import { stat } from 'node:fs/promises';
import type { Writable } from 'node:stream';
import { FPS } from '../catalog';
import { CancelledError } from '../common/errors';
import { abortReason, describeExit, FfmpegProcess, type FfmpegExit } from './ffmpeg';
import { commitFile, removeQuietly, tempSibling } from './files';
import { floatToRgb8, type FloatRange, type PixelLayout } from './pixels';
import { interleave, sampleCount, type PcmAudio } from './types';

export const VIDEO_AUDIO_RATE = 32000;
/**
 * x264 CRF 18: visually near-lossless for generated footage (smooth gradients, fine texture); higher
 * values show banding in skies and skin first. About 8-9 Mbit/s on textured 768p content.
 * Preset 'veryfast': on the 2-core reference box it encodes 768p 2-2.5x faster than 'medium' for about
 * 7% more bytes at the same CRF, and close() returns about 1 s after the last frame instead of 6-8 s
 * (docs/performance.md, "Media"). A user-chosen quality can map onto crf/preset later.
 */
export const DEFAULT_CRF = 18;
export const DEFAULT_PRESET = 'veryfast';
export const AAC_BITRATE = '128k';

export interface VideoWriterOptions {
  /** Final .mp4 path; its folder must exist. Nothing appears there until close() succeeds. */
  path: string;
  /** Even numbers (yuv420p); the spec's sizes are multiples of 32. */
  width: number;
  height: number;
  /** The job's exact frame count (17k+5). writeFrame refuses more; close() refuses fewer. */
  frames: number;
  /** Stereo (or mono, duplicated) audio at any rate; may instead be passed to close(). None at all gives silence. */
  audio?: PcmAudio;
  /**
   * Frames are either 8-bit RGB (Uint8Array or Buffer, always HWC `[H, W, 3]`) or Float32Array in `floatRange`
   * ([-1, 1] by default) laid out per `frameLayout` (HWC by default; 'chw' takes `[3, H, W]`).
   */
  floatRange?: FloatRange;
  frameLayout?: PixelLayout;
  crf?: number;
  preset?: string;
  /** Longest wait for ffmpeg to accept one frame, or to finish after close(), before it is killed. Default 120 s. */
  stallTimeoutMs?: number;
  /** ffmpeg is killed if the caller neither writes nor closes for this long (a forgotten writer). Default 15 min. */
  idleTimeoutMs?: number;
  /** On abort: ffmpeg is killed, temp files removed, pending and later calls throw CancelledError. */
  signal?: AbortSignal;
}

export interface VideoResult {
  path: string;
  frames: number;
  bytes: number;
}

export interface VideoWriter {
  readonly framesWritten: number;
  /** Queues one frame; resolves when ffmpeg's pipe has taken it (the buffer may then be reused). Call sequentially. */
  writeFrame(frame: Uint8Array | Float32Array): Promise<void>;
  /** Finishes encoding, muxes the audio and renames into place. */
  close(audio?: PcmAudio): Promise<VideoResult>;
  /** Gives up: kills ffmpeg and removes temp files. Safe to call at any time, also after a failure. */
  abort(): Promise<void>;
}

/**
 * Starts the encoder. Throws Error for invalid options (a caller bug), CancelledError if `signal` already fired.
 * writeFrame/close throw CancelledError on abort and Error if ffmpeg fails or stalls (an internal failure, not the user's).
 */
export async function openVideoWriter(opts: VideoWriterOptions): Promise<VideoWriter> {
  const { width, height, frames } = opts;
  if (!Number.isInteger(width) || !Number.isInteger(height) || width < 2 || height < 2 || width % 2 || height % 2) {
    throw new Error(`openVideoWriter: size ${width}x${height} must be even integers (yuv420p)`);
  }
  if (!Number.isInteger(frames) || frames < 1) throw new Error(`openVideoWriter: frames ${frames} must be a positive integer`);
  if (opts.audio) checkAudio(opts.audio);
  if (opts.signal?.aborted) throw new CancelledError(abortReason(opts.signal));
  return new Mp4Writer(opts);
}

type State = 'open' | 'busy' | 'closing' | 'done' | 'failed';

class Mp4Writer implements VideoWriter {
  framesWritten = 0;
  private state: State = 'open';
  private failure: Error | undefined;
  private readonly videoTmp: string;
  private finalTmp: string | undefined;
  private readonly encoder: FfmpegProcess;
  private muxer: FfmpegProcess | undefined;
  private scratch: Buffer | undefined;
  private readonly stallMs: number;
  private readonly idleMs: number;
  private readonly frameBytes: number;
  private readonly onAbort = () => void this.fail(new CancelledError(abortReason(this.opts.signal)));

  constructor(private readonly opts: VideoWriterOptions) {
    this.stallMs = opts.stallTimeoutMs ?? 120_000;
    this.idleMs = opts.idleTimeoutMs ?? 15 * 60_000;
    this.frameBytes = opts.width * opts.height * 3;
    this.videoTmp = tempSibling(opts.path);
    // prettier-ignore
    const args = [
      '-f', 'rawvideo', '-pix_fmt', 'rgb24', '-s', `${opts.width}x${opts.height}`, '-framerate', String(FPS), '-i', 'pipe:0',
      '-an',
      // RGB to BT.709 limited-range YUV, and tag it so, so players do not guess BT.601 for small sizes.
      '-vf', 'scale=out_color_matrix=bt709:out_range=tv,format=yuv420p',
      '-color_primaries', 'bt709', '-color_trc', 'bt709', '-colorspace', 'bt709', '-color_range', 'tv',
      '-c:v', 'libx264', '-preset', opts.preset ?? DEFAULT_PRESET, '-crf', String(opts.crf ?? DEFAULT_CRF),
      '-profile:v', 'high', '-pix_fmt', 'yuv420p',
      '-frames:v', String(opts.frames),
      '-f', 'mp4', '-y', this.videoTmp,
    ];
    this.encoder = new FfmpegProcess(args, { timeoutMs: this.idleMs, stdout: 'ignore' });
    opts.signal?.addEventListener('abort', this.onAbort, { once: true });
    // An encoder that dies on its own (bad args, disk full) fails the writer at once.
    void this.encoder.exited.then((exit) => {
      if (exit.end === 'exit' && exit.code === 0) return;
      if (this.state === 'open' || this.state === 'busy') void this.fail(this.exitError('video encode', exit));
    });
  }

  async writeFrame(frame: Uint8Array | Float32Array): Promise<void> {
    this.checkUsable('writeFrame');
    if (this.framesWritten >= this.opts.frames) throw new Error(`writeFrame: all ${this.opts.frames} frames were already written`);
    let buf: Buffer;
    if (frame instanceof Float32Array) {
      this.scratch ??= Buffer.allocUnsafe(this.frameBytes);
      buf = floatToRgb8(frame, this.opts.width, this.opts.height, this.opts.floatRange ?? 'signed', this.opts.frameLayout ?? 'hwc', this.scratch);
    } else {
      if (frame.byteLength !== this.frameBytes) {
        throw new Error(`writeFrame: ${frame.byteLength} bytes, expected ${this.opts.width}x${this.opts.height}x3 = ${this.frameBytes} (HWC rgb24)`);
      }
      buf = Buffer.from(frame.buffer, frame.byteOffset, frame.byteLength);
    }
    this.state = 'busy';
    this.encoder.setDeadline(this.stallMs);
    try {
      await this.pipeWrite(this.encoder, this.encoder.stdin, buf, 'video encode');
    } finally {
      if (this.state === 'busy') this.state = 'open';
    }
    this.framesWritten++;
    this.encoder.setDeadline(this.idleMs);
  }

  async close(audio?: PcmAudio): Promise<VideoResult> {
    this.checkUsable('close');
    if (this.framesWritten !== this.opts.frames) {
      const err = new Error(`close: ${this.framesWritten} of ${this.opts.frames} frames were written`);
      await this.fail(err);
      throw err;
    }
    this.state = 'closing';
    try {
      const pcm = audio ?? this.opts.audio;
      if (pcm) checkAudio(pcm);
      // 1. let x264 drain its lookahead and finish the file
      this.encoder.setDeadline(this.stallMs);
      this.encoder.stdin.end();
      const encoded = await this.encoder.exited;
      this.throwIfFailed();
      if (encoded.end !== 'exit' || encoded.code !== 0) throw this.exitError('video encode', encoded);

      // 2. mux: copy H.264, encode audio from fd 3
      const { bytes: audioBytes, rate, channels } = fitAudio(pcm, this.opts.frames);
      this.finalTmp = tempSibling(this.opts.path);
      // prettier-ignore
      const args = [
        '-i', this.videoTmp,
        '-f', 'f32le', '-ar', String(rate), '-ac', String(channels), '-i', 'pipe:3',
        '-map', '0:v:0', '-map', '1:a:0',
        '-c:v', 'copy',
        '-c:a', 'aac', '-b:a', AAC_BITRATE, '-ar', String(VIDEO_AUDIO_RATE), '-ac', '2',
        '-movflags', '+faststart',
        '-f', 'mp4', '-y', this.finalTmp,
      ];
      this.muxer = new FfmpegProcess(args, { timeoutMs: this.stallMs, signal: this.opts.signal, extraPipes: 1, stdout: 'ignore' });
      this.muxer.stdin.end();
      await this.pipeWrite(this.muxer, this.muxer.pipes[0], audioBytes, 'mux');
      this.muxer.pipes[0].end();
      const muxed = await this.muxer.exited;
      this.throwIfFailed();
      if (muxed.end !== 'exit' || muxed.code !== 0) throw this.exitError('mux', muxed);

      await commitFile(this.finalTmp, this.opts.path);
      await removeQuietly(this.videoTmp);
      this.state = 'done';
      this.opts.signal?.removeEventListener('abort', this.onAbort);
      const { size } = await stat(this.opts.path);
      return { path: this.opts.path, frames: this.opts.frames, bytes: size };
    } catch (err) {
      await this.fail(err as Error);
      throw this.failure ?? err;
    }
  }

  async abort(): Promise<void> {
    await this.fail(new CancelledError('video writer aborted'));
  }

  /** Writes `buf` into a pipe of `proc`; rejects if the process ends first, or with the writer's failure. */
  private pipeWrite(proc: FfmpegProcess, pipe: Writable, buf: Buffer, what: string): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      let settled = false;
      const settle = (err?: Error) => {
        if (settled) return;
        settled = true;
        if (err) reject(err);
        else resolve();
      };
      pipe.write(buf, (err) => {
        if (err) void proc.exited.then((exit) => settle(this.failure ?? this.exitError(what, exit)));
        else settle();
      });
      void proc.exited.then((exit) => settle(this.failure ?? this.exitError(what, exit)));
    });
  }

  private exitError(what: string, exit: FfmpegExit): Error {
    if (exit.end === 'cancelled') return new CancelledError(abortReason(this.opts.signal));
    if (exit.end === 'timeout') return new Error(`${what}: ffmpeg made no progress for ${Math.round(this.stallMs / 1000)} s (or the writer sat idle) and was killed`);
    return new Error(describeExit(what, exit));
  }

  private checkUsable(what: string): void {
    this.throwIfFailed();
    if (this.state === 'busy') throw new Error(`${what}: the previous writeFrame has not finished (await each call)`);
    if (this.state !== 'open') throw new Error(`${what}: the writer is ${this.state}`);
  }

  private throwIfFailed(): void {
    if (this.failure) throw this.failure;
    if (this.opts.signal?.aborted) throw new CancelledError(abortReason(this.opts.signal));
  }

  /** First failure wins: kill both processes and remove every temp file. */
  private async fail(err: Error): Promise<void> {
    if (this.state === 'done') return;
    if (!this.failure) this.failure = err;
    this.state = 'failed';
    this.opts.signal?.removeEventListener('abort', this.onAbort);
    const reason = err instanceof CancelledError ? 'cancelled' : 'stopped';
    this.encoder.kill(reason);
    this.muxer?.kill(reason);
    await Promise.all([this.encoder.exited, this.muxer?.exited]);
    await removeQuietly(this.videoTmp, this.finalTmp);
  }
}

function checkAudio(a: PcmAudio): void {
  if (a.channels !== 1 && a.channels !== 2) throw new Error(`video audio: ${a.channels} channels, expected 1 (duplicated) or 2`);
  if (!Number.isInteger(a.sampleRate) || a.sampleRate < 1000) throw new Error(`video audio: sampleRate ${a.sampleRate} is not valid`);
  if (a.data.length % a.channels) throw new Error(`video audio: ${a.data.length} samples do not divide into ${a.channels} channels`);
}

/**
 * Stereo interleaved f32le bytes of exactly frames/24 s at the audio's own rate: trimmed, or padded with
 * silence; mono is duplicated to both channels; no audio gives silence at 32 kHz.
 */
function fitAudio(pcm: PcmAudio | undefined, frames: number): { bytes: Buffer; rate: number; channels: 2 } {
  const rate = pcm?.sampleRate ?? VIDEO_AUDIO_RATE;
  const want = Math.round((frames * rate) / FPS);
  const out = new Float32Array(want * 2); // zeros: the padding
  if (pcm) {
    const src = interleave(pcm);
    const n = Math.min(want, sampleCount(pcm));
    const mono = pcm.channels === 1;
    for (let i = 0; i < n; i++) {
      // NaN from a diverged model would poison the AAC encoder; it becomes silence.
      const l = mono ? src[i] : src[2 * i];
      const r = mono ? l : src[2 * i + 1];
      out[2 * i] = l === l ? l : 0;
      out[2 * i + 1] = r === r ? r : 0;
    }
  }
  return { bytes: Buffer.from(out.buffer, out.byteOffset, out.byteLength), rate, channels: 2 };
}
