// Test helpers for src/media: fixtures made with ffmpeg's lavfi sources, and ffprobe-style checks
// parsed from what ffmpeg prints (the same ffmpeg the service runs: resolveFfmpeg in src/media/ffmpeg.ts).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after } from 'node:test';
import { FFMPEG_PATH } from '../../src/media/ffmpeg';

/** A fresh temp folder, removed when the test file finishes. */
export function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'kiln-media-test-'));
  after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Runs ffmpeg synchronously; throws with stderr on failure. Returns stdout and stderr. */
export function ffmpeg(args: string[]): { stdout: Buffer; stderr: string } {
  const r = spawnSync(FFMPEG_PATH, ['-hide_banner', '-nostdin', '-y', ...args], { maxBuffer: 1 << 30 });
  const stderr = r.stderr.toString();
  if (r.status !== 0) throw new Error(`ffmpeg ${args.join(' ')} failed:\n${stderr.slice(-2000)}`);
  return { stdout: r.stdout, stderr };
}

export interface ProbedVideo {
  codec: string;
  profile: string;
  pixFmt: string;
  width: number;
  height: number;
  fps: number;
  colour: string;
}
export interface ProbedAudio {
  codec: string;
  sampleRate: number;
  layout: string;
}
export interface Probe {
  container: string;
  durationS: number;
  video?: ProbedVideo;
  audio?: ProbedAudio;
}

/** Container, duration and first video/audio stream, parsed from `ffmpeg -i file`. */
export function probe(file: string): Probe {
  const r = spawnSync(FFMPEG_PATH, ['-hide_banner', '-nostdin', '-i', file]);
  const err = r.stderr.toString();
  const container = /Input #0, (.+?), from /.exec(err)?.[1];
  const dur = /Duration: (\d+):(\d+):([\d.]+)/.exec(err);
  if (!container || !dur) throw new Error(`probe ${file}: ${err}`);
  const out: Probe = { container, durationS: Number(dur[1]) * 3600 + Number(dur[2]) * 60 + Number(dur[3]) };
  // Video: h264 (High) (avc1 / 0x31637661), yuv420p(tv, bt709), 160x96, 61 kb/s, 24 fps, 24 tbr, ...
  const v = /Stream #0:\d+[^:]*: Video: (\w+)(?: \(([^)]*)\))?[^,]*, (\w+)(\([^)]*\))?, (\d+)x(\d+)[^\n]*?, ([\d.]+) fps/.exec(err);
  if (v) out.video = { codec: v[1], profile: v[2] ?? '', pixFmt: v[3], colour: v[4] ?? '', width: Number(v[5]), height: Number(v[6]), fps: Number(v[7]) };
  const a = /Stream #0:\d+[^:]*: Audio: (\w+)[^,\n]*, (\d+) Hz, ([^,\n]+)/.exec(err);
  if (a) out.audio = { codec: a[1], sampleRate: Number(a[2]), layout: a[3].trim() };
  return out;
}

/** Number of video packets (= frames for H.264 without B-frame splitting), counted by the framecrc muxer. */
export function countVideoFrames(file: string): number {
  const { stdout } = ffmpeg(['-i', file, '-map', '0:v:0', '-c', 'copy', '-f', 'framecrc', '-']);
  return stdout
    .toString()
    .split('\n')
    .filter((l) => /^0,/.test(l)).length;
}

/** The first audio track decoded to interleaved f32 at its own rate and channel count. */
export function decodeAudioTrack(file: string, rate: number, channels: number): Float32Array {
  const { stdout } = ffmpeg(['-i', file, '-map', '0:a:0', '-ar', String(rate), '-ac', String(channels), '-f', 'f32le', '-']);
  const f = new Float32Array(Math.floor(stdout.length / 4));
  new Uint8Array(f.buffer).set(stdout.subarray(0, f.length * 4));
  return f;
}

/** Frame `index` of the first video track as rgb24 HWC. */
export function videoFrameRgb(file: string, width: number, height: number, index = 0): Buffer {
  const { stdout } = ffmpeg(['-i', file, '-map', '0:v:0', '-vf', `select=eq(n\\,${index})`, '-frames:v', '1', '-f', 'rawvideo', '-pix_fmt', 'rgb24', '-']);
  if (stdout.length !== width * height * 3) throw new Error(`frame ${index}: ${stdout.length} bytes`);
  return stdout;
}

/** Top-level mp4 box types in order (ftyp, moov, mdat, ...): +faststart puts moov before mdat. */
export function mp4Boxes(buf: Buffer): string[] {
  const types: string[] = [];
  let off = 0;
  while (off + 8 <= buf.length) {
    let size = buf.readUInt32BE(off);
    const type = buf.toString('latin1', off + 4, off + 8);
    if (size === 1) size = Number(buf.readBigUInt64BE(off + 8));
    if (size === 0) size = buf.length - off;
    types.push(type);
    if (size < 8) break;
    off += size;
  }
  return types;
}

/** Root mean square of every `stride`-th sample starting at `start`, over [from, to) sample frames. */
export function rms(data: Float32Array, opts: { start?: number; stride?: number; from?: number; to?: number } = {}): number {
  const stride = opts.stride ?? 1;
  const start = opts.start ?? 0;
  const from = opts.from ?? 0;
  const to = Math.min(opts.to ?? Infinity, Math.floor((data.length - start + stride - 1) / stride));
  let s = 0;
  for (let i = from; i < to; i++) s += data[start + i * stride] ** 2;
  return Math.sqrt(s / Math.max(1, to - from));
}

export function listDir(dir: string): string[] {
  return readdirSync(dir).sort();
}

/** Pixel (x, y) of an HWC rgb24 buffer. */
export function pixel(buf: Uint8Array, width: number, x: number, y: number): [number, number, number] {
  const o = (y * width + x) * 3;
  return [buf[o], buf[o + 1], buf[o + 2]];
}

/** Pixel (x, y) of a CHW tensor in [-1, 1], mapped back to 0..255. */
export function tensorPixel(t: { data: Float32Array; shape: [3, number, number] }, x: number, y: number): [number, number, number] {
  const [, h, w] = t.shape;
  const n = h * w;
  const i = y * w + x;
  return [0, 1, 2].map((c) => Math.round((t.data[c * n + i] + 1) * 127.5)) as [number, number, number];
}

/** Asserts each channel is within `tol` of `want`. */
export function near(got: number[], want: number[], tol: number): boolean {
  return got.length === want.length && got.every((g, i) => Math.abs(g - want[i]) <= tol);
}
