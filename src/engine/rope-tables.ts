// RoPE cos/sin tables, computed on the CPU in float64 and rounded to f32 once (then uploaded).
// A table holds one angle per rotated pair: cos/sin [L, P] (row-major), P = R/2 pairs for R rotated dims.
// Which head dims a pair rotates (rotate-half vs interleaved pairs) is the apply kernel's business
// (src/engine/ops/rope.ts); the table only fixes the angle of pair j at position l.
//
//   rope1d:    angle[l, j] = pos[l] * theta^(-2j/R)                          (Qwen3 text, GPT-NeoX)
//   ropeAxes:  pairs split per axis a into dims[a]/2 consecutive pairs, each axis with its own frequency
//              ladder theta^(-2k/dims[a]) and its own positions                (Qwen-Image (16,56,56), H3)
//   mrope:     Qwen-VL multimodal rope: one ladder theta^(-2j/R) over all pairs, each pair takes its position
//              from axis t, h or w: 'interleaved' (Qwen3-VL: j = 1 mod 3 below 3*section[1] -> h,
//              j = 2 mod 3 below 3*section[2] -> w, else t) or 'sectioned' (Qwen2-VL: consecutive runs of
//              section[0], section[1], section[2] pairs).
import type { Engine } from './engine';
import type { Tensor } from './tensor';

export interface RopeTable {
  /** Positions (rows). */
  length: number;
  /** Rotated pairs per position (R/2). */
  pairs: number;
  cos: Float32Array;
  sin: Float32Array;
}

/** theta^(-2k/dim) for k < dim/2, in float64. */
export function ropeInvFreq(dim: number, theta: number): Float64Array {
  if (!Number.isInteger(dim) || dim < 2 || dim % 2) throw new RangeError(`rope: rotated dim ${dim} must be even and >= 2`);
  return Float64Array.from({ length: dim / 2 }, (_, k) => 1 / theta ** ((2 * k) / dim));
}

/** Builds the table from per-pair (position, frequency) choices: angle = pos[axis(j)][l] * freq[j]. */
function build(length: number, freq: Float64Array, axisOf: (j: number) => number, positions: readonly ArrayLike<number>[]): RopeTable {
  const pairs = freq.length;
  const cos = new Float32Array(length * pairs);
  const sin = new Float32Array(length * pairs);
  for (let l = 0; l < length; l++) {
    for (let j = 0; j < pairs; j++) {
      const a = positions[axisOf(j)]![l]! * freq[j]!;
      cos[l * pairs + j] = Math.cos(a);
      sin[l * pairs + j] = Math.sin(a);
    }
  }
  return { length, pairs, cos, sin };
}

function checkPositions(op: string, positions: readonly ArrayLike<number>[], axes: number): number {
  if (positions.length !== axes) throw new RangeError(`${op}: ${positions.length} position axes, expected ${axes}`);
  const n = positions[0]!.length;
  positions.forEach((p, a) => {
    if (p.length !== n) throw new RangeError(`${op}: axis ${a} has ${p.length} positions, axis 0 has ${n}`);
  });
  return n;
}

/** 1D RoPE over R rotated dims. Positions may be fractional (float64). */
export function rope1d(positions: ArrayLike<number>, rotatedDim: number, theta = 10000): RopeTable {
  return build(positions.length, ropeInvFreq(rotatedDim, theta), () => 0, [positions]);
}

/** Multi-axis RoPE: axis a rotates dims[a] dims (its pairs consecutive, axes in order), sum(dims) = R. */
export function ropeAxes(positions: readonly ArrayLike<number>[], dims: readonly number[], theta: number | readonly number[] = 10000): RopeTable {
  const n = checkPositions('ropeAxes', positions, dims.length);
  const freqs: number[] = [];
  const axis: number[] = [];
  dims.forEach((d, a) => {
    const th = typeof theta === 'number' ? theta : theta[a]!;
    for (const f of ropeInvFreq(d, th)) {
      freqs.push(f);
      axis.push(a);
    }
  });
  return build(n, Float64Array.from(freqs), (j) => axis[j]!, positions);
}

export type MropeMode = 'interleaved' | 'sectioned';

/** Qwen-VL MRoPE over R = 2 * sum(section) rotated dims; positions [t, h, w] (text rows: all three equal). */
export function mrope(positions: readonly ArrayLike<number>[], section: readonly [number, number, number], theta = 10000, mode: MropeMode = 'interleaved'): RopeTable {
  const n = checkPositions('mrope', positions, 3);
  const pairs = section[0] + section[1] + section[2];
  const freq = ropeInvFreq(2 * pairs, theta);
  const axisOf =
    mode === 'interleaved'
      ? (j: number) => (j % 3 === 1 && j < 3 * section[1] ? 1 : j % 3 === 2 && j < 3 * section[2] ? 2 : 0)
      : (j: number) => (j < section[0] ? 0 : j < section[0] + section[1] ? 1 : 2);
  return build(n, freq, axisOf, positions);
}

/** Positions of a row-major (t, h, w) grid of T*H*W tokens, each axis starting at its offset. */
export function gridPositions(t: number, h: number, w: number, offset: readonly [number, number, number] = [0, 0, 0]): [Float64Array, Float64Array, Float64Array] {
  const n = t * h * w;
  const pt = new Float64Array(n);
  const ph = new Float64Array(n);
  const pw = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    pt[i] = offset[0] + Math.floor(i / (h * w));
    ph[i] = offset[1] + (Math.floor(i / w) % h);
    pw[i] = offset[2] + (i % w);
  }
  return [pt, ph, pw];
}

/** Uploads a table as two f32 tensors [L, P] (free both). */
export function uploadRope(e: Engine, table: RopeTable): { cos: Tensor; sin: Tensor } {
  const shape = [table.length, table.pairs];
  return { cos: e.upload(table.cos, shape, 'f32', 'rope cos'), sin: e.upload(table.sin, shape, 'f32', 'rope sin') };
}
