// The demo's grammar and geometry (tools/train-demo/procedural.py, the same tables): what a prompt asks, and where
// its shape and background are in a picture, for tests that check what the trained demo draws.
import { makeRng } from '../engine/helpers';

export const DEMO_COLORS: Record<string, [number, number, number]> = {
  red: [220, 30, 30], green: [30, 180, 40], blue: [30, 60, 220], yellow: [235, 220, 40],
  white: [245, 245, 245], black: [15, 15, 15], orange: [240, 140, 20], purple: [140, 40, 170],
};
export const DEMO_SHAPES = ['circle', 'square', 'triangle'] as const;
/** Position word (or none: centre) -> fraction of the frame. */
export const DEMO_POSITIONS: Record<string, [number, number]> = {
  '': [0.5, 0.5], center: [0.5, 0.5], left: [0.25, 0.5], right: [0.75, 0.5], top: [0.5, 0.25], bottom: [0.5, 0.75],
};
/** The shape's size across, as a fraction of the short side. */
const SIZE = 0.25;

export interface DemoPrompt {
  color: string;
  shape: (typeof DEMO_SHAPES)[number];
  position: string;
  background: string;
}

export function demoPromptText(p: DemoPrompt): string {
  return `a ${p.color} ${p.shape}${p.position ? ` at the ${p.position}` : ''} on a ${p.background} background`;
}

/** Every prompt of the grammar (the background differs from the shape's color). */
export function allDemoPrompts(): DemoPrompt[] {
  const out: DemoPrompt[] = [];
  for (const color of Object.keys(DEMO_COLORS))
    for (const shape of DEMO_SHAPES)
      for (const position of Object.keys(DEMO_POSITIONS))
        for (const background of Object.keys(DEMO_COLORS)) if (background !== color) out.push({ color, shape, position, background });
  return out;
}

/** The palette color nearest to an RGB mean (Euclidean in sRGB). */
export function nearestColor(rgb: number[]): string {
  let best = '';
  let bestD = Infinity;
  for (const [name, c] of Object.entries(DEMO_COLORS)) {
    const d = (rgb[0]! - c[0]) ** 2 + (rgb[1]! - c[1]) ** 2 + (rgb[2]! - c[2]) ** 2;
    if (d < bestD) [best, bestD] = [name, d];
  }
  return best;
}

type Box = [x0: number, y0: number, x1: number, y1: number];

/** A box well inside the shape (any of the three): around its centre (a triangle's lower middle), half its size. */
export function shapeCore(p: DemoPrompt, width: number, height: number): Box {
  const [fx, fy] = DEMO_POSITIONS[p.position]!;
  const r = (SIZE * Math.min(width, height)) / 2;
  const cx = fx * width;
  const cy = fy * height + (p.shape === 'triangle' ? r / 8 : 0);
  return [cx - r / 4, cy - r / 4, cx + r / 4, cy + r / 4];
}

/** The four corner boxes (a tenth of each side): background for every position. */
export function cornerBoxes(width: number, height: number): Box[] {
  const w = width / 10, h = height / 10;
  return [[0, 0, w, h], [width - w, 0, width, h], [0, height - h, w, height], [width - w, height - h, width, height]];
}

/** Mean RGB of a box of an RGB(A) raster. */
export function meanRgb(data: Uint8Array | Buffer, width: number, channels: number, box: Box): number[] {
  const sum = [0, 0, 0];
  let n = 0;
  for (let y = Math.round(box[1]); y < Math.round(box[3]); y++)
    for (let x = Math.round(box[0]); x < Math.round(box[2]); x++) {
      const i = (y * width + x) * channels;
      for (let c = 0; c < 3; c++) sum[c]! += data[i + c]!;
      n++;
    }
  return sum.map((s) => s / n);
}

/** A seeded pick of `n` distinct prompts (the engine tests' mulberry32, makeRng), the same on every run. */
export function pickDemoPrompts(n: number, seed: number): DemoPrompt[] {
  const rand = makeRng(seed).next;
  const all = allDemoPrompts();
  const out: DemoPrompt[] = [];
  while (out.length < n) {
    const p = all.splice(Math.floor(rand() * all.length), 1)[0]!;
    out.push(p);
  }
  return out;
}
