// Whether 'auto' takes the tensor-core (subgroup-matrix) kernels (issue 43, production settings): on wherever the
// adapter has the feature and a self-test of the variants 'auto' would take passes on this device, checked once per
// engine by whoever serves jobs (the GPU worker, in its EngineHolder's onCreated), and reported with the device
// (Engine.describe().tensorCores, which the worker's hello carries). A variant that fails leaves the path off with
// its error named, never a job computed wrong; the register-tiled GEMM and the flash attention stay the fallback.
//
//   off: KILN_SUBGROUP_MATRIX=0; the adapter lacks the feature (lavapipe, most non-NVIDIA Vulkan drivers today);
//        the GEMM variant failed its check.
//   on:  GEMMs whose output is 'medium' or 'large' (tuning.ts shape classes) take the tensor-core kernel unless the
//        adapter's tuning table says otherwise; 'small' ones stay register-tiled until a sweep says more. Attention
//        takes its tensor-core kernel too, unless KILN_SUBGROUP_ATTENTION=0 or its own check failed.
//
// Each check: fresh random f16 inputs (multiples of 2^-8 in [-1, 1], exact in f16) at sizes that are no multiple of
// any tile, read back and held to a float64 reference on the same f16 values. Tolerance: the f16 output's rounding
// (2^-11 of the value) plus the f32 accumulation's, bounded by 2^-9 of the sum of |products|; a kernel that reads a
// wrong element or skips a tile is off by about the size of a product, far outside it.
import type { Engine } from './engine';
import { attention } from './ops/attention';
import { matmul } from './ops/matmul';
import { subgroupMatrixPlan } from './ops/matmul_subgroup';
import type { TensorCoreState } from './tensor-core-state';
import { DEFAULT_GEMM, SHAPE_CLASSES } from './tuning';

export { TENSOR_CORES_UNCHECKED, type TensorCoreState } from './tensor-core-state';

export interface TensorCoreCheckOptions {
  /** The emulated builtins (tests on lavapipe): checks the kernels, but 'auto' still needs the native feature. */
  emulate?: boolean;
  /** GEMM variants to check (SUBGROUP_TILES names, or 'default' for the preset 'auto' picks); default: those 'auto'
   * would take here (KILN_SUBGROUP_TILE, the tuning table's, else the default). */
  gemmVariants?: string[];
  /** Check (and allow) the tensor-core attention; default unless KILN_SUBGROUP_ATTENTION=0. */
  attention?: boolean;
  /** Test hook: a GEMM run in place of matmul's subgroup path for a variant (a kernel made to fail). */
  runGemm?: (variant: string, a: Float32Array, b: Float32Array, M: number, K: number, N: number) => Promise<Float32Array>;
}

/** Checks the variants on `e` and returns the state to use (Engine.useTensorCores applies it); never throws: an
 * unexpected error leaves the path off, named. */
export async function checkTensorCores(e: Engine, o: TensorCoreCheckOptions = {}): Promise<TensorCoreState> {
  const t0 = performance.now();
  return check(e, o, t0).catch((err: unknown) => ({ gemm: false, attention: false, reason: `the self-test stopped: ${(err as Error).message}`, checked: [], ms: performance.now() - t0 }));
}

async function check(e: Engine, o: TensorCoreCheckOptions, t0: number): Promise<TensorCoreState> {
  const off = (reason: string, checked: string[] = []): TensorCoreState => ({ gemm: false, attention: false, reason, checked, ms: performance.now() - t0 });
  if (e.settings.subgroupMatrixOff) return off('KILN_SUBGROUP_MATRIX=0');
  if (e.shapeOnly) return off('a shape-only engine runs nothing to check');
  const plan = subgroupMatrixPlan(e, { emulate: o.emulate });
  if ('reason' in plan) return off(plan.reason);
  const checked: string[] = [];
  for (const variant of o.gemmVariants ?? autoGemmVariants(e)) {
    checked.push(`gemm ${variant}`);
    const err = await checkGemm(e, variant, o);
    if (err) return off(`the tensor-core GEMM (${variant}) failed its self-test: ${err}`, checked);
  }
  let attentionOn = o.attention ?? e.settings.subgroupAttention;
  let why = `checked on ${e.describe().name}: ${checked.join(', ')}`;
  if (attentionOn) {
    checked.push('attention');
    const err = await checkAttention(e, o.emulate ?? false);
    if (err) {
      attentionOn = false;
      why += `; the tensor-core attention failed its self-test (${err}): flash attention kept`;
    } else why += ', attention';
  } else why += '; attention keeps the flash kernel (KILN_SUBGROUP_ATTENTION=0)';
  return { gemm: true, attention: attentionOn, reason: why, checked, ms: performance.now() - t0 };
}

/** The GEMM variants 'auto' would take on this engine once the path is on. */
function autoGemmVariants(e: Engine): string[] {
  if (e.settings.subgroupTile !== undefined) return [e.settings.subgroupTile];
  const named = SHAPE_CLASSES.map((c) => e.tuning.table?.gemm[c] ?? DEFAULT_GEMM[c]).flatMap((c) => (c.path === 'subgroup' && c.variant ? [c.variant] : []));
  return [...new Set(['default', ...named])];
}

/** Values k / 256 for k in [-256, 256]: exact in f16, so the reference sees what the kernel sees. */
function f16Exact(n: number): Float32Array {
  const v = new Float32Array(n);
  for (let i = 0; i < n; i++) v[i] = Math.round((Math.random() * 2 - 1) * 256) / 256;
  return v;
}

/** undefined when a variant's GEMM matches the reference, else what was wrong. */
async function checkGemm(e: Engine, variant: string, o: TensorCoreCheckOptions): Promise<string | undefined> {
  const [M, K, N] = [67, 80, 72];
  const a = f16Exact(M * K);
  const b = f16Exact(K * N);
  let got: Float32Array;
  try {
    got = o.runGemm
      ? await o.runGemm(variant, a, b, M, K, N)
      : await e.scope(async () => {
          const ta = e.upload(a, [M, K], 'f16', 'tensor-core check a');
          const tb = e.upload(b, [K, N], 'f16', 'tensor-core check b');
          const tile = variant === 'default' ? undefined : (variant as never);
          return e.read(matmul(e, ta, tb, { path: 'subgroup', subgroup: { tile, emulate: o.emulate } }));
        });
  } catch (err) {
    return (err as Error).message;
  }
  let worst = { excess: 0, at: '', got: 0, want: 0, tol: 0 };
  for (let i = 0; i < M; i++) {
    for (let j = 0; j < N; j++) {
      let want = 0;
      let mag = 0;
      for (let k = 0; k < K; k++) {
        const p = a[i * K + k]! * b[k * N + j]!;
        want += p;
        mag += Math.abs(p);
      }
      const tol = 2 ** -9 * mag + 2 ** -11 * Math.abs(want) + 1e-6;
      const g = got[i * N + j]!;
      const excess = Number.isFinite(g) ? Math.abs(g - want) / tol : Number.POSITIVE_INFINITY;
      if (excess > worst.excess) worst = { excess, at: `(${i}, ${j})`, got: g, want, tol };
    }
  }
  return worst.excess > 1 ? `${M}x${K} by ${K}x${N}: ${worst.got} at ${worst.at} against ${worst.want.toFixed(5)} (tolerance ${worst.tol.toExponential(2)})` : undefined;
}

/** undefined when the tensor-core attention matches the reference, else what was wrong. */
async function checkAttention(e: Engine, emulate: boolean): Promise<string | undefined> {
  const [H, L, D] = [2, 37, 64];
  const q = f16Exact(H * L * D);
  const k = f16Exact(H * L * D);
  const v = f16Exact(H * L * D);
  let got: Float32Array;
  try {
    got = await e.scope(async () => {
      const up = (x: Float32Array, what: string) => e.upload(x, [1, H, L, D], 'f16', `tensor-core check ${what}`);
      // the tuning table's attention variant where it names one ('auto' takes it), else the default
      const named = e.tuning.table?.attention;
      const tile = named?.path === 'subgroup' ? (named.variant as never) : undefined;
      return e.read(attention(e, up(q, 'q'), up(k, 'k'), up(v, 'v'), { path: 'subgroup', subgroup: { emulate, tile } }));
    });
  } catch (err) {
    return (err as Error).message;
  }
  const scale = 1 / Math.sqrt(D);
  for (let h = 0; h < H; h++) {
    for (let i = 0; i < L; i++) {
      const s = new Float64Array(L);
      for (let j = 0; j < L; j++) {
        let dot = 0;
        for (let d = 0; d < D; d++) dot += q[(h * L + i) * D + d]! * k[(h * L + j) * D + d]!;
        s[j] = dot * scale;
      }
      const max = Math.max(...s);
      let sum = 0;
      for (let j = 0; j < L; j++) sum += s[j] = Math.exp(s[j]! - max);
      for (let d = 0; d < D; d++) {
        let want = 0;
        for (let j = 0; j < L; j++) want += (s[j]! / sum) * v[(h * L + j) * D + d]!;
        // P is rounded to f16 before P.V (2^-11 relative) and the output too: outputs are at most 1 in size
        const g = got[(h * L + i) * D + d]!;
        if (!(Math.abs(g - want) <= 2 ** -8)) return `(${H}, ${L}, ${D}) head ${h} row ${i} dim ${d}: ${g} against ${want.toFixed(5)} (tolerance ${2 ** -8})`;
      }
    }
  }
  return undefined;
}
