// Benchmark: encode a 768p (1344x768) 15 s clip (365 frames, the 17k+5 grid) with stereo audio, the
// way a video job does it: float HWC frames in [-1, 1] go into openVideoWriter one at a time as a VAE
// would hand them over, and 48 kHz stereo audio arrives at close().
//   npm run bench:media [-- --preset medium --crf 18 --frames 365]
// Frames come from a pool of 16 pre-rendered textured frames played back and forth (smooth motion,
// no jumps), so the time measured is the writer's (float->rgb24, pipe, x264, mux) and not the
// synthetic generator's; the pool (16 x 12 MB) is included in node's peak RSS.
// Reports wall seconds, fps, the wait after the last frame (close: x264 drain + mux), peak RSS of this
// process and of the largest ffmpeg child (VmHWM, polled from /proc), and the file size.
import { mkdirSync, readFileSync, readdirSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { DEFAULT_CRF, DEFAULT_PRESET, openVideoWriter } from '../../src/media/video-writer';

const arg = (name: string, def: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : def;
};
const W = 1344;
const H = 768;
const FRAMES = Number(arg('frames', '365'));
const preset = arg('preset', DEFAULT_PRESET);
const crf = Number(arg('crf', String(DEFAULT_CRF)));

/** Peak resident set (VmHWM, kB) of every ffmpeg child seen so far, by pid. */
const childPeaks = new Map<number, number>();
function pollChildren(): void {
  for (const tid of readdirSync(`/proc/${process.pid}/task`)) {
    let kids: string[] = [];
    try {
      kids = readFileSync(`/proc/${process.pid}/task/${tid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean);
    } catch {
      continue;
    }
    for (const k of kids) {
      try {
        const hwm = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${k}/status`, 'utf8'));
        if (hwm) childPeaks.set(Number(k), Math.max(childPeaks.get(Number(k)) ?? 0, Number(hwm[1])));
      } catch {
        // exited between listing and reading
      }
    }
  }
}

const POOL = 16;

/**
 * Frame t of a moving plasma with two texture layers drifting in different directions, so x264 has
 * real work (a flat gradient, or one rigidly moving texture, would encode unrealistically fast).
 */
function renderFrames(count: number): Float32Array[] {
  const L = 4096;
  const wave = (f: number, ph: number) => Float32Array.from({ length: L }, (_, i) => Math.sin(i * f + ph));
  const sx = [wave(0.021, 0), wave(0.017, 1), wave(0.013, 2)];
  const sy = [wave(0.029, 0.5), wave(0.023, 1.5), wave(0.031, 2.5)];
  let seed = 12345;
  const rnd = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32) * 0.06 - 0.03;
  const n1 = Float32Array.from({ length: W * H }, rnd);
  const n2 = Float32Array.from({ length: W * H }, rnd);
  const frames: Float32Array[] = [];
  for (let t = 0; t < count; t++) {
    const frame = new Float32Array(W * H * 3);
    for (let c = 0; c < 3; c++) {
      for (let y = 0; y < H; y++) {
        const vy = sy[c][(y + t * (c + 1)) % L];
        const r1 = ((y + t) % H) * W;
        const r2 = ((y + H - ((2 * t) % H)) % H) * W;
        for (let x = 0; x < W; x++) {
          frame[(y * W + x) * 3 + c] = 0.35 * (sx[c][(x + 3 * t) % L] + vy) + n1[r1 + ((x + 2 * t) % W)] + n2[r2 + ((x + W - t) % W)];
        }
      }
    }
    frames.push(frame);
  }
  return frames;
}

/** 0 1 .. 15 14 .. 1 0 1 ..: smooth back-and-forth motion through the pool. */
const pingPong = (i: number) => {
  const p = i % (2 * POOL - 2);
  return p < POOL ? p : 2 * POOL - 2 - p;
};

function stereo(seconds: number, rate: number): { data: Float32Array; sampleRate: number; channels: number; layout: 'planar' } {
  const n = Math.round(seconds * rate);
  const data = new Float32Array(2 * n);
  for (let i = 0; i < n; i++) {
    const t = i / rate;
    data[i] = 0.3 * Math.sin(2 * Math.PI * (220 + 40 * t) * t);
    data[n + i] = 0.3 * Math.sin(2 * Math.PI * 330 * t);
  }
  return { data, sampleRate: rate, channels: 2, layout: 'planar' };
}

async function main(): Promise<void> {
  const outDir = join(__dirname, '..', '..', '..', '..', 'bench', 'out');
  mkdirSync(outDir, { recursive: true });
  const path = join(outDir, 'media-encode-768p.mp4');
  const pool = renderFrames(POOL);
  const audio = stereo(FRAMES / 24, 48000);
  const poll = setInterval(pollChildren, 50);

  const baselineMb = process.memoryUsage().rss / 1048576;
  const t0 = performance.now();
  const w = await openVideoWriter({ path, width: W, height: H, frames: FRAMES, preset, crf });
  for (let i = 0; i < FRAMES; i++) await w.writeFrame(pool[pingPong(i)]);
  const c = performance.now();
  const res = await w.close(audio);
  const closeMs = performance.now() - c;
  const wallS = (performance.now() - t0) / 1000;
  clearInterval(poll);

  const ffPeakMb = Math.max(0, ...childPeaks.values()) / 1024;
  const nodePeakMb = process.resourceUsage().maxRSS / 1024;
  const cpu = cpus();
  console.log(`media encode bench: ${W}x${H}, ${FRAMES} frames (${(FRAMES / 24).toFixed(2)} s) + 48 kHz stereo, preset ${preset}, crf ${crf}`);
  console.log(`machine: ${cpu.length} x ${cpu[0]?.model ?? 'unknown CPU'}, node ${process.version}`);
  console.log(`encode ${wallS.toFixed(1)} s (${(FRAMES / wallS).toFixed(1)} fps), of which close() after the last frame ${(closeMs / 1000).toFixed(1)} s`);
  console.log(`output ${(res.bytes / 1048576).toFixed(1)} MB (${((res.bytes * 8) / (FRAMES / 24) / 1e6).toFixed(1)} Mbit/s)`);
  console.log(`peak RSS: node ${nodePeakMb.toFixed(0)} MB (${baselineMb.toFixed(0)} MB before opening the writer, incl. the ${((POOL * W * H * 12) / 1048576).toFixed(0)} MB frame pool), ffmpeg ${ffPeakMb.toFixed(0)} MB (largest child; ${childPeaks.size} children seen)`);
  console.log(`output: ${res.path}`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
