// CPU reference for shaders/rope.wgsl and src/engine/rope-tables.ts: float64 angles written the way the
// upstream code states them (HF's inv_freq, Qwen3-VL's apply_interleaved_mrope slice overwrite, per-axis
// concatenation), and a plain rotation.
import type { HostTensor } from '../helpers';

export type Angles = { data: Float64Array; length: number; pairs: number };

function invFreq(dim: number, theta: number): number[] {
  const out: number[] = [];
  for (let k = 0; k < dim; k += 2) out.push(1 / Math.pow(theta, k / dim)); // HF: arange(0, dim, 2) / dim
  return out;
}

export function angles1dRef(pos: ArrayLike<number>, dim: number, theta: number): Angles {
  const f = invFreq(dim, theta);
  const data = new Float64Array(pos.length * f.length);
  for (let l = 0; l < pos.length; l++) for (let j = 0; j < f.length; j++) data[l * f.length + j] = pos[l]! * f[j]!;
  return { data, length: pos.length, pairs: f.length };
}

/** Per-axis tables concatenated along the pair dim (Qwen-Image / Flux style). */
export function anglesAxesRef(pos: ArrayLike<number>[], dims: number[], theta: number): Angles {
  const parts = dims.map((d, a) => angles1dRef(pos[a]!, d, theta));
  const pairs = parts.reduce((s, p) => s + p.pairs, 0);
  const n = pos[0]!.length;
  const data = new Float64Array(n * pairs);
  for (let l = 0; l < n; l++) {
    let j0 = 0;
    for (const p of parts) {
      for (let j = 0; j < p.pairs; j++) data[l * pairs + j0 + j] = p.data[l * p.pairs + j]!;
      j0 += p.pairs;
    }
  }
  return { data, length: n, pairs };
}

/** Qwen3-VL: freqs[axis] over the full ladder, then freqs_t[..., offset:3*section[axis]:3] = freqs[axis]. */
export function mropeInterleavedRef(pos: ArrayLike<number>[], section: number[], theta: number): Angles {
  const dim = 2 * (section[0]! + section[1]! + section[2]!);
  const f = [0, 1, 2].map((a) => angles1dRef(pos[a]!, dim, theta));
  const t = f[0]!;
  const data = Float64Array.from(t.data);
  for (const [axis, offset] of [[1, 1], [2, 2]] as const) {
    for (let l = 0; l < t.length; l++) for (let j = offset; j < 3 * section[axis]!; j += 3) data[l * t.pairs + j] = f[axis]!.data[l * t.pairs + j]!;
  }
  return { data, length: t.length, pairs: t.pairs };
}

/** Qwen2-VL: the pair dim split into consecutive sections taken from t, h, w. */
export function mropeSectionedRef(pos: ArrayLike<number>[], section: number[], theta: number): Angles {
  const dim = 2 * (section[0]! + section[1]! + section[2]!);
  const f = [0, 1, 2].map((a) => angles1dRef(pos[a]!, dim, theta));
  const P = dim / 2;
  const data = new Float64Array(f[0]!.length * P);
  for (let l = 0; l < f[0]!.length; l++) {
    let j = 0;
    for (let a = 0; a < 3; a++) for (let k = 0; k < section[a]!; k++, j++) data[l * P + j] = f[a]!.data[l * P + j]!;
  }
  return { data, length: f[0]!.length, pairs: P };
}

/** x [B, L, H, D] rotated by angles [Bt, L, P] (Bt = 1 broadcasts); dims >= 2P pass through. */
export function ropeRef(x: HostTensor, ang: Float64Array, tablesBatch: number, pairs: number, style: 'half' | 'interleaved'): HostTensor {
  const [B, L, H, D] = x.shape as [number, number, number, number];
  const out = Float64Array.from(x.data);
  for (let b = 0; b < B; b++)
    for (let l = 0; l < L; l++)
      for (let h = 0; h < H; h++) {
        const row = ((b * L + l) * H + h) * D;
        for (let j = 0; j < pairs; j++) {
          const a = ang[((tablesBatch === 1 ? 0 : b) * L + l) * pairs + j]!;
          const [i0, i1] = style === 'half' ? [j, j + pairs] : [2 * j, 2 * j + 1];
          const x0 = x.data[row + i0]!;
          const x1 = x.data[row + i1]!;
          out[row + i0] = x0 * Math.cos(a) - x1 * Math.sin(a);
          out[row + i1] = x1 * Math.cos(a) + x0 * Math.sin(a);
        }
      }
  return { data: out, shape: [...x.shape] };
}
