// Sampling helpers for autoregressive decoding: repetition penalty, top-k (1..64), temperature and a seeded
// draw per row, all on the GPU (three dispatches, no readback). The same (seed, step) gives the same tokens.
//   shader:    shaders/sampling.wgsl (entries prepare, penalize / penalize_int, pick / pick_int; override WG)
//   reference: test/engine/reference/sampling.ts
//   tests:     test/engine/sampling.test.ts
import type { Engine } from '../engine';
import { Params } from '../kernels';
import { grid1d } from '../recorder';
import { fmtShape, type Tensor } from '../tensor';
import { outputTensor } from './checks';

export const MAX_TOP_K = 64;
const WG = 64;

export interface SampleOptions {
  /** Divides the top-k logits before the softmax; 0 = greedy. Default 1. */
  temperature?: number;
  /** 1 = greedy argmax. Default 1. */
  topK?: number;
  /** HF repetition penalty (> 0): positive logits of previous tokens are divided by it, negative multiplied. */
  repetitionPenalty?: number;
  /** f32 token ids already generated: (B, P) per row or (P) for every row; ids outside [0, V) are ignored. */
  prevTokens?: Tensor;
  /** RNG key: the draw for row b is uniform(seed, step, b) (see samplingUniform). */
  seed?: number;
  step?: number;
  /** f32 (B) output: a contiguous view at any element offset. */
  out?: Tensor;
  /**
   * Ids as int32 bits in the 4-byte f32-typed storage uploadIds makes, for out and prevTokens alike: the output
   * then feeds gather() directly on the GPU (no readback between a draw and the next embedding lookup). Read such
   * ids on the host as Int32Array over the bytes of e.read's result (readIds). Default false: f32 values.
   */
  intIds?: boolean;
}

/** logits (B, V) -> f32 token ids (B) (int32 bits with intIds). */
export function sample(e: Engine, logits: Tensor, o: SampleOptions = {}): Tensor {
  if (logits.dtype !== 'f32' && logits.dtype !== 'f16') throw new TypeError(`sample: logits ${logits}: only f32 and f16`);
  if (logits.rank !== 2) throw new RangeError(`sample: logits${fmtShape(logits.shape)} must be (B, V)`);
  const [B, V] = logits.shape as [number, number];
  const k = o.topK ?? 1;
  const temperature = o.temperature ?? 1;
  const penalty = o.repetitionPenalty ?? 1;
  if (!Number.isInteger(k) || k < 1 || k > Math.min(MAX_TOP_K, V)) throw new RangeError(`sample: topK ${k} for logits${fmtShape(logits.shape)} must be 1..${Math.min(MAX_TOP_K, V)}`);
  if (!(temperature >= 0)) throw new RangeError(`sample: temperature ${temperature} must be >= 0`);
  if (!(penalty > 0)) throw new RangeError(`sample: repetitionPenalty ${penalty} must be > 0`);
  if (B > 65535 || V > 2 ** 24) throw new RangeError(`sample: logits${fmtShape(logits.shape)}: B <= 65535 and V <= 2^24`);
  const prev = o.prevTokens;
  if (prev && (prev.dtype !== 'f32' || prev.rank < 1 || prev.rank > 2 || (prev.rank === 2 && prev.shape[0] !== B))) {
    throw new RangeError(`sample: prevTokens ${prev} must be f32 (${B}, P) or (P) for logits${fmtShape(logits.shape)}`);
  }
  const P = prev && penalty !== 1 ? prev.shape[prev.rank - 1]! : 0;
  // out: any contiguous f32 (B) view at any element offset (the params' out_off)
  // out may share storage with prevTokens (a table of ids whose next slot is drawn): penalize reads them in an
  // earlier dispatch than the one pick writes in, so even overlapping elements are read before they are written
  const out = outputTensor(e, 'sample', [B], 'f32', o.out, [logits], true);

  const params = new Params()
    .u32(B).u32(V).u32(P).u32(k)
    .u32(logits.offset).u32(logits.strides[0]!).u32(logits.strides[1]!).u32(o.seed ?? 0)
    .u32(prev?.offset ?? 0).u32(prev?.rank === 2 ? prev.strides[0]! : 0).u32(prev ? prev.strides[prev.rank - 1]! : 0).u32(o.step ?? 0)
    .f32(temperature).f32(penalty).u32(out.offset).u32(0);
  const scratch = e.empty([B, V], 'f32', 'sample scratch');
  const spec = (entry: string) => e.kernels.get({ shader: 'sampling', entry, dtype: logits.dtype, constants: { WG } });
  e.recorder.dispatch({ kernel: spec('prepare'), bindings: [scratch, logits], params, workgroups: grid1d(B * V, WG) });
  const int = o.intIds ?? false;
  if (P > 0) e.recorder.dispatch({ kernel: spec(int ? 'penalize_int' : 'penalize'), bindings: [scratch, logits, prev!], params, workgroups: grid1d(B * P, WG) });
  e.recorder.dispatch({ kernel: spec(int ? 'pick_int' : 'pick'), bindings: [out, scratch], params, workgroups: [B] });
  scratch.free(); // reuse is ordered on the queue after the pick dispatch
  return out;
}

/** Reads int32 ids (uploadIds / sample with intIds) back to the host: one GPU->CPU wait. */
export async function readIds(e: Engine, ids: Tensor): Promise<Int32Array> {
  if (ids.dtype !== 'f32') throw new TypeError(`readIds: ${ids} must be the f32-typed storage of int32 ids`);
  const f = await e.read(ids);
  return new Int32Array(f.buffer, f.byteOffset, f.length);
}

/** The draw sample() uses for row `row` (the shader's rand_uniform), for logging and CPU replays. */
export function samplingUniform(seed: number, step: number, row: number): number {
  return (pcg((pcg((pcg(seed >>> 0) ^ step) >>> 0) ^ row) >>> 0) >>> 8) / 16777216;
}

function pcg(x: number): number {
  const state = (Math.imul(x >>> 0, 747796405) + 2891336453) >>> 0;
  const word = Math.imul(((state >>> ((state >>> 28) + 4)) ^ state) >>> 0, 277803737) >>> 0;
  return ((word >>> 22) ^ word) >>> 0;
}
