// Shared test helpers for every op family: one engine per test file, a seeded RNG, poisoned outputs,
// odd sizes, non-contiguous views, and a comparison with a stated tolerance per dtype.
import { after } from 'node:test';
import { Engine } from '../../src/engine/engine';
import { roundToDType, type DType } from '../../src/engine/dtype';
import { type Tensor, contiguousStrides, fmtShape, numelOf } from '../../src/engine/tensor';

let shared: Promise<Engine> | null = null;
// Registered when the test file imports this module, so it runs once after all of the file's tests
// (inside a test, after() would scope to that test).
after(async () => (await shared)?.shutdown());

/** The file's engine (debug mode: errors name their kernel). Destroyed after the file's tests. */
export function testEngine(): Promise<Engine> {
  shared ??= Engine.create({ debug: true, allowSoftware: true });
  return shared;
}

// ---- seeded randomness: a new seed per run unless KILN_TEST_SEED is set; printed when a test fails ----

export interface Rng {
  readonly seed: number;
  /** Uniform in [0, 1). */
  next(): number;
  uniform(n: number, lo?: number, hi?: number): Float64Array;
  normal(n: number, std?: number): Float64Array;
  /** Integer in [lo, hi]. */
  int(lo: number, hi: number): number;
}

export function makeRng(seed: number): Rng {
  let s = seed >>> 0;
  const next = () => {
    // mulberry32
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    seed,
    next,
    uniform: (n, lo = -1, hi = 1) => Float64Array.from({ length: n }, () => lo + (hi - lo) * next()),
    normal: (n, std = 1) =>
      Float64Array.from({ length: n }, () => std * Math.sqrt(-2 * Math.log(1 - next())) * Math.cos(2 * Math.PI * next())),
    int: (lo, hi) => lo + Math.floor(next() * (hi - lo + 1)),
  };
}

export function testSeed(): number {
  const env = process.env.KILN_TEST_SEED;
  return env ? Number(env) >>> 0 : (Math.random() * 2 ** 32) >>> 0;
}

/** Wraps a test body: passes a fresh seeded RNG and adds the seed to any failure. */
export function seeded(fn: (rng: Rng) => Promise<void> | void): () => Promise<void> {
  return async () => {
    const rng = makeRng(testSeed());
    try {
      await fn(rng);
    } catch (e) {
      if (e instanceof Error) e.message += `\n  (seed ${rng.seed}: rerun with KILN_TEST_SEED=${rng.seed})`;
      throw e;
    }
  };
}

/** Sizes that are not multiples of any tile or workgroup: primes and near-powers of two. */
export const ODD_SIZES = [1, 3, 7, 13, 31, 33, 63, 65, 127, 129, 257] as const;

// ---- tensors for tests ----

/** A host array plus its shape: what references take and return (logical row-major order). */
export interface HostTensor {
  data: Float64Array;
  shape: number[];
}

/** Random input rounded to what dtype holds, so the CPU reference sees exactly the GPU's input. */
export function randomHost(rng: Rng, shape: number[], dtype: DType, lo = -1, hi = 1): HostTensor {
  return { data: roundToDType(rng.uniform(numelOf(shape), lo, hi), dtype), shape };
}

/** An output tensor filled with NaN, so elements a kernel forgets to write fail the comparison. */
export function poisoned(e: Engine, shape: number[], dtype: DType): Tensor {
  const t = e.empty(shape, dtype, `poisoned ${dtype}${fmtShape(shape)}`);
  e.fill(t, NaN);
  return t;
}

export type Layout = 'contiguous' | 'transposed' | 'sliced';

/**
 * Uploads host data as a view with the given layout and the same logical values:
 *   transposed: stored with the last two dims swapped, returned as .transpose() (rank >= 2)
 *   sliced:     stored inside a larger tensor (padding around every dim), returned as slices
 * Returns the view and its base (free the base).
 */
export function uploadAs(e: Engine, h: HostTensor, dtype: DType, layout: Layout): { view: Tensor; base: Tensor } {
  if (layout === 'transposed' && h.shape.length >= 2) {
    const r = h.shape.length;
    const tshape = [...h.shape];
    [tshape[r - 2], tshape[r - 1]] = [h.shape[r - 1]!, h.shape[r - 2]!];
    const stored = permuteHost(h, r);
    const base = e.upload(stored, tshape, dtype);
    return { view: base.transpose(-2, -1), base };
  }
  if (layout === 'sliced') {
    const big = h.shape.map((n) => n + 2);
    const data = new Float64Array(numelOf(big)).fill(NaN);
    const bs = contiguousStrides(big);
    const hs = contiguousStrides(h.shape);
    for (let i = 0; i < h.data.length; i++) {
      let j = 0;
      for (let d = 0; d < h.shape.length; d++) j += (Math.floor(i / hs[d]!) % h.shape[d]! + 1) * bs[d]!;
      data[j] = h.data[i]!;
    }
    const base = e.upload(data, big, dtype);
    let view = base;
    h.shape.forEach((n, d) => (view = view.slice(d, 1, n + 1)));
    return { view, base };
  }
  const base = e.upload(h.data, h.shape, dtype);
  return { view: base, base };
}

/** Host data with the last two dims swapped (so that a transpose view of it reads as h). */
function permuteHost(h: HostTensor, r: number): Float64Array {
  const rows = h.shape[r - 2]!;
  const cols = h.shape[r - 1]!;
  const batch = numelOf(h.shape) / (rows * cols);
  const out = new Float64Array(h.data.length);
  for (let b = 0; b < batch; b++)
    for (let i = 0; i < rows; i++) for (let j = 0; j < cols; j++) out[b * rows * cols + j * rows + i] = h.data[b * rows * cols + i * cols + j]!;
  return out;
}

// ---- comparison ----

export interface Tolerance {
  atol: number;
  rtol: number;
}

/** Stated tolerances: |got - want| <= atol + rtol * |want|. f32 kernels match a float64 reference to about
 * 1 ulp per operation; f16 results are rounded to 11 significant bits (2^-11 = 4.9e-4) plus f16 accumulation. */
export const TOLERANCE: Readonly<Record<DType, Tolerance>> = {
  f32: { atol: 1e-5, rtol: 1e-5 },
  f16: { atol: 1e-2, rtol: 1e-2 },
  i8: { atol: 0, rtol: 0 },
};

/**
 * Compares GPU output with the reference; on failure throws with the worst element (index, coordinates,
 * got, want), how many elements failed, and the tolerance. NaN where the reference is not NaN always fails
 * (poisoned outputs that were never written).
 */
export function assertClose(got: ArrayLike<number>, want: HostTensor, tol: Tolerance | DType, label: string): void {
  const t = typeof tol === 'string' ? TOLERANCE[tol] : tol;
  if (got.length !== want.data.length) throw new Error(`${label}: ${got.length} elements, reference has ${want.data.length}`);
  let worst = -1;
  let worstExcess = -Infinity;
  let bad = 0;
  for (let i = 0; i < got.length; i++) {
    const g = got[i]!;
    const w = want.data[i]!;
    let excess: number;
    if (Number.isNaN(w) || Number.isNaN(g)) excess = Number.isNaN(w) && Number.isNaN(g) ? -1 : Infinity;
    else if (!Number.isFinite(w) || !Number.isFinite(g)) excess = g === w ? -1 : Infinity;
    else excess = Math.abs(g - w) - (t.atol + t.rtol * Math.abs(w));
    if (excess > 0) bad++;
    if (excess > worstExcess) {
      worstExcess = excess;
      worst = i;
    }
  }
  if (bad > 0) {
    const coords = contiguousStrides(want.shape).map((s, d) => Math.floor(worst / s) % want.shape[d]!);
    throw new Error(
      `${label}: ${bad}/${got.length} elements outside atol=${t.atol} rtol=${t.rtol}; worst at [${coords.join(',')}] ` +
        `(flat ${worst}): got ${got[worst]}, want ${want.data[worst]} (shape ${fmtShape(want.shape)})`,
    );
  }
}

/** Stores host (B, H, L, D) as (B, L, H, D) (a packed QKV layout) and returns the permuted view. */
export function uploadBLHD(e: Engine, h: HostTensor, dtype: 'f32' | 'f16'): { view: Tensor; base: Tensor } {
  const [B, H, L, D] = h.shape as [number, number, number, number];
  const data = new Float64Array(h.data.length);
  for (let b = 0; b < B; b++) for (let hh = 0; hh < H; hh++) for (let l = 0; l < L; l++) for (let d = 0; d < D; d++)
    data[((b * L + l) * H + hh) * D + d] = h.data[((b * H + hh) * L + l) * D + d]!;
  const base = e.upload(data, [B, L, H, D], dtype);
  return { view: base.permute([0, 2, 1, 3]), base };
}
