// Seeded random weights for synthetic checkpoints (synthetic-checkpoint.ts): the demo checkpoints and the benchmarks.
// Each tensor's values follow a rule picked from its key and shape, at the scales upstream's layers expect, so
// activations stay O(1) through every block of any model; nobody is meant to learn anything from them.
import { createHash } from 'node:crypto';
import { f32ToBf16Bits, f32ToF16Bits } from '../../engine/dtype';
import { SAFE_DTYPE_BYTES, type SafeDType, type TensorEntry } from '../../engine/safetensors';
import { encodeSafe, type WriteTensor } from '../../engine/safetensors-writer';
import { numelOf } from '../../engine/tensor';

type Rule = { kind: 'normal' | 'uniform'; lo: number; scale: number };

/**
 * The distribution of a tensor, by its key and shape (the rules tools/golden/qwen3_tts.py uses, so activations stay
 * O(1) through every block): codebook usage counts positive, Snake alphas/betas small (log scale), layer scales and
 * ConvNeXt gammas in [0.5, 1], norms around 1, biases small, embeddings and codebooks N(0, 1), matrices and conv
 * kernels N(0, 1 / fan_in).
 */
export function weightRule(name: string, shape: readonly number[]): Rule {
  const leaf = name.slice(name.lastIndexOf('.') + 1);
  if (leaf === 'cluster_usage') return { kind: 'uniform', lo: 0.5, scale: 1.5 };
  if (leaf === 'embedding_sum' || leaf === 'embed_sum') return { kind: 'normal', lo: 0, scale: 1 };
  if (leaf === 'alpha' || leaf === 'beta') return { kind: 'normal', lo: 0, scale: 0.3 };
  if (leaf === 'scale' || leaf === 'gamma') return { kind: 'uniform', lo: 0.5, scale: 0.5 };
  if (shape.length === 1 && leaf === 'weight') return { kind: 'normal', lo: 1, scale: 0.2 };
  if (leaf === 'bias') return { kind: 'normal', lo: 0, scale: 0.1 };
  if (shape.length === 2 && name.includes('embed')) return { kind: 'normal', lo: 0, scale: 1 };
  if (shape.length >= 2) return { kind: 'normal', lo: 0, scale: 1 / Math.sqrt(shape.slice(1).reduce((a, b) => a * b, 1)) };
  return { kind: 'normal', lo: 0, scale: 1 };
}

/** A prime, so a pool replayed along a matrix never lines rows up with each other. */
const POOL = 1_000_003;

/**
 * Seeded random weights, fast at any size: one pool of POOL standard draws (normal and uniform), each tensor a window
 * of it at an offset hashed from its name, scaled by its rule. F16 and BF16 pools are kept as bits, so filling
 * gigabytes of 16-bit weights is a copy. Deterministic: the same seed gives the same bytes for the same key whatever the order.
 */
export class WeightSynth {
  private readonly normal: Float32Array;
  private readonly uniform: Float32Array;
  /** 16-bit pools (F16 or BF16 bits) per dtype and rule. */
  private readonly halves = new Map<string, Uint16Array>();

  constructor(seed: number) {
    let s = seed >>> 0 || 1;
    const next = () => {
      // xorshift32: plenty for weights nobody is meant to learn anything from
      s ^= s << 13;
      s >>>= 0;
      s ^= s >>> 17;
      s ^= s << 5;
      s >>>= 0;
      return (s + 0.5) / 2 ** 32;
    };
    this.uniform = new Float32Array(POOL);
    this.normal = new Float32Array(POOL);
    for (let i = 0; i < POOL; i++) {
      this.uniform[i] = next();
      this.normal[i] = Math.sqrt(-2 * Math.log(next())) * Math.cos(2 * Math.PI * next());
    }
  }

  /** Where tensor `name` starts in the pool. */
  private offset(name: string): number {
    return createHash('sha256').update(name).digest().readUInt32LE(0) % POOL;
  }

  /** Values of elements [first, first + n) of `name`. */
  values(name: string, shape: readonly number[], first = 0, n = numelOf(shape) - first): Float32Array {
    const r = weightRule(name, shape);
    const src = r.kind === 'normal' ? this.normal : this.uniform;
    const out = new Float32Array(n);
    let p = (this.offset(name) + first) % POOL;
    for (let i = 0; i < n; i++) {
      out[i] = r.lo + r.scale * src[p]!;
      if (++p === POOL) p = 0;
    }
    return out;
  }

  /**
   * The tensors of a checkpoint to write (writeSafetensors): every key of `shapes` (SyntheticCheckpoint.shapes) with
   * its values, stored as `dtype` (one for all, or per key), each value times `scale(key)` where that gives a number.
   */
  tensors(shapes: ReadonlyMap<string, number[]>, dtype: SafeDType | ((key: string) => SafeDType), scale?: (key: string) => number | undefined): Record<string, WriteTensor> {
    const out: Record<string, WriteTensor> = {};
    for (const [k, shape] of shapes) {
      const data = this.values(k, shape);
      const s = scale?.(k);
      if (s !== undefined) for (let i = 0; i < data.length; i++) data[i]! *= s;
      out[k] = { dtype: typeof dtype === 'string' ? dtype : dtype(k), shape, data };
    }
    return out;
  }

  /** SyntheticCheckpointOptions.fill for any stored dtype (F16 and BF16 by copying cached bits). */
  readonly fill = (entry: TensorEntry, out: Uint8Array, first: number): void => {
    const n = out.byteLength / SAFE_DTYPE_BYTES[entry.dtype];
    if ((entry.dtype !== 'F16' && entry.dtype !== 'BF16') || out.byteOffset % 2 !== 0) {
      out.set(encodeSafe(this.values(entry.name, entry.shape, first, n), entry.dtype));
      return;
    }
    const r = weightRule(entry.name, entry.shape);
    const key = `${entry.dtype}:${r.kind}:${r.lo}:${r.scale}`;
    let bits = this.halves.get(key);
    if (!bits) {
      const src = r.kind === 'normal' ? this.normal : this.uniform;
      const toBits = entry.dtype === 'F16' ? f32ToF16Bits : f32ToBf16Bits;
      bits = new Uint16Array(POOL);
      for (let i = 0; i < POOL; i++) bits[i] = toBits(r.lo + r.scale * src[i]!);
      this.halves.set(key, bits);
    }
    const dst = new Uint16Array(out.buffer, out.byteOffset, n);
    let p = (this.offset(entry.name) + first) % POOL;
    for (let i = 0; i < n; ) {
      const take = Math.min(n - i, POOL - p);
      dst.set(bits.subarray(p, p + take), i);
      i += take;
      p = 0;
    }
  };
}

/** BF16 tensors of `shapes` to write: random values from `synth` (a demo), or none (null: holes, the sparse files of
 * a plan's checkpoint, see writeSafetensors). */
export function checkpointTensors(shapes: ReadonlyMap<string, number[]>, synth: WeightSynth | null): Record<string, WriteTensor> {
  return synth ? synth.tensors(shapes, 'BF16') : Object.fromEntries([...shapes].map(([k, shape]) => [k, { dtype: 'BF16' as const, shape, data: null }]));
}
