// The video demo's grammar (tools/train-demo/procedural_video.py, the same tables) and a judge of a clip: what a
// prompt asks, and what a decoded clip shows and sounds like (video_eval.py judge, the same rules), for tests that
// check what the trained video demo makes.
import { makeRng } from '../engine/helpers';
import { DEMO_COLORS, nearestColor } from './demo-grammar';

export const DIRECTIONS = ['left', 'right', 'up', 'down'] as const;
export const BEEPS = { high: 1200, low: 320 } as const;

export interface VideoDemoPrompt {
  color: string;
  direction: (typeof DIRECTIONS)[number];
  background: string;
  beep: keyof typeof BEEPS;
}

export function videoPromptText(p: VideoDemoPrompt): string {
  return `a ${p.color} ball moving ${p.direction} on a ${p.background} background, ${p.beep} beep`;
}

/** `n` prompts, every direction in turn and the beeps alternating, ball and background colors drawn with a seeded
 * generator (the engine tests' mulberry32), the background differing from the ball: the same on every run. */
export function pickVideoPrompts(n: number, seed: number): VideoDemoPrompt[] {
  const rand = makeRng(seed).next;
  const colors = Object.keys(DEMO_COLORS);
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(rand() * xs.length)]!;
  return Array.from({ length: n }, (_, i) => {
    const color = pick(colors);
    return { color, direction: DIRECTIONS[i % 4]!, background: pick(colors.filter((c) => c !== color)), beep: i % 2 ? 'low' : 'high' };
  });
}

export interface ClipJudgement {
  background: string;
  ball: string | null;
  direction: string | null;
  beep: keyof typeof BEEPS;
  /** Spectral magnitude in 1,000-1,400 Hz over 220-420 Hz. */
  bandRatio: number;
}

/** Energy near `hz` (a Goertzel-free DFT sum over a band, 5 Hz bins) of a mono signal at `rate`. */
function bandMagnitude(x: Float32Array, rate: number, lo: number, hi: number): number {
  let sum = 0;
  for (let f = lo; f <= hi; f += 5) {
    let re = 0;
    let im = 0;
    const w = (2 * Math.PI * f) / rate;
    for (let i = 0; i < x.length; i++) {
      re += x[i]! * Math.cos(w * i);
      im -= x[i]! * Math.sin(w * i);
    }
    sum += Math.hypot(re, im);
  }
  return sum;
}

/**
 * What a clip shows and sounds like: frames [F][H x W x 3] rgb24, audio interleaved stereo at `rate`.
 *   background  the palette color nearest the median of the middle frame's 8-pixel border
 *   ball        the palette color nearest the mean of every pixel that differs from that background by > 60 (L1)
 *   direction   the larger axis of the change of those pixels' centroid from the first to the last quarter of frames
 *   beep        high when the 1,000-1,400 Hz band holds more magnitude than the 220-420 Hz band
 */
export function judgeClip(frames: Buffer[], width: number, height: number, audio: Float32Array, rate: number): ClipJudgement {
  const mid = frames[Math.floor(frames.length / 2)]!;
  const border: number[][] = [[], [], []];
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      if (y >= 8 && y < height - 8 && x >= 8 && x < width - 8) continue;
      const i = (y * width + x) * 3;
      for (let c = 0; c < 3; c++) border[c]!.push(mid[i + c]!);
    }
  }
  const median = (v: number[]) => v.sort((a, b) => a - b)[v.length >> 1]!;
  const bg = border.map(median);
  const sum = [0, 0, 0];
  let count = 0;
  const centroids: ([number, number] | null)[] = frames.map((f) => {
    let sx = 0, sy = 0, n = 0;
    for (let y = 0; y < height; y++) {
      for (let x = 0; x < width; x++) {
        const i = (y * width + x) * 3;
        if (Math.abs(f[i]! - bg[0]!) + Math.abs(f[i + 1]! - bg[1]!) + Math.abs(f[i + 2]! - bg[2]!) <= 60) continue;
        sx += x; sy += y; n++;
        for (let c = 0; c < 3; c++) sum[c]! += f[i + c]!;
      }
    }
    count += n;
    return n >= 20 ? [sx / n, sy / n] : null;
  });
  const q = Math.max(1, frames.length >> 2);
  const mean = (cs: ([number, number] | null)[], k: 0 | 1) => {
    const v = cs.filter((c): c is [number, number] => !!c);
    return v.length ? v.reduce((s, c) => s + c[k], 0) / v.length : NaN;
  };
  const dx = mean(centroids.slice(-q), 0) - mean(centroids.slice(0, q), 0);
  const dy = mean(centroids.slice(-q), 1) - mean(centroids.slice(0, q), 1);
  const direction = Number.isNaN(dx) || Number.isNaN(dy) ? null : Math.abs(dx) > Math.abs(dy) ? (dx > 0 ? 'right' : 'left') : dy > 0 ? 'down' : 'up';
  const mono = new Float32Array(audio.length >> 1).map((_, i) => (audio[2 * i]! + audio[2 * i + 1]!) / 2);
  const hi = bandMagnitude(mono, rate, 1000, 1400);
  const lo = bandMagnitude(mono, rate, 220, 420);
  return {
    background: nearestColor(bg),
    ball: count > 50 ? nearestColor(sum.map((s) => s / count)) : null,
    direction,
    beep: hi > lo ? 'high' : 'low',
    bandRatio: hi / Math.max(lo, 1e-9),
  };
}
