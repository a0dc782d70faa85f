// A host-memory copy of a decoder's prepared weights, so a model loaded for every job (MiniMax H3's 32B text encoder,
// freed before sampling) is rebuilt on the GPU without reading or re-quantising the checkpoint again. Attached to a
// Checkpoint (attachHostWeights), it is consulted by weights.ts's loadPlain / loadLinear: a key it holds is uploaded
// from its bytes (one writeBuffer pass per tensor, no file read); a key it lacks is read from the checkpoint, prepared
// on the host exactly as loadTensor / quantizeInt8PerChannel would (same conversion, same bytes) and kept. Once
// sealed, a miss is an error rather than a read: the checkpoint may be closed or its folder gone by then.
// The copy holds exactly the bytes the GPU tensors get: compute-dtype norms and plain linears, int8 linears as
// (q int8 (N, K), scales f32 (N)) (the scales are converted to the compute dtype at upload, as uploadInt8 does).
import { DTYPE_BYTES } from '../../engine/dtype';
import type { Engine } from '../../engine/engine';
import { readConverted } from '../../engine/load';
import { uploadInt8, type QuantizedInt8 } from '../../engine/quantize';
import { quantizeInt8FromCheckpoint } from '../../engine/quantize-parallel';
import { CheckpointError, type Checkpoint } from '../../engine/safetensors';
import type { Tensor } from '../../engine/tensor';
import type { Int8Weight } from '../../engine/ops/linear';
import type { ComputeDType } from './weights';

/** A plain tensor's bytes in its compute dtype, row-major. */
interface HostTensor {
  shape: readonly number[];
  dtype: ComputeDType;
  bytes: Uint8Array;
}

const attached = new WeakMap<Checkpoint, HostWeights>();

/** Makes loadPlain / loadLinear on `ckpt` go through `host` (record on a miss, replay on a hit). */
export function attachHostWeights(ckpt: Checkpoint, host: HostWeights): void {
  attached.set(ckpt, host);
}

export function detachHostWeights(ckpt: Checkpoint): void {
  attached.delete(ckpt);
}

/** The host copy attached to `ckpt`, if any (weights.ts). */
export function hostWeightsOf(ckpt: Checkpoint): HostWeights | undefined {
  return attached.get(ckpt);
}

export class HostWeights {
  private readonly plain = new Map<string, HostTensor>();
  private readonly int8 = new Map<string, QuantizedInt8>();
  private sealed = false;
  /** Tensors read from the checkpoint (misses) and uploaded from the host copy (hits), for tests and logs. */
  readonly counts = { read: 0, replayed: 0 };

  /** Host bytes held: what the copy costs in RAM. */
  get bytes(): number {
    let n = 0;
    for (const t of this.plain.values()) n += t.bytes.byteLength;
    for (const q of this.int8.values()) n += q.q.byteLength + q.scales.byteLength;
    return n;
  }

  get size(): number {
    return this.plain.size + this.int8.size;
  }

  /** After the first complete load: from now on every key must be a hit (nothing is read from the checkpoint). */
  seal(): void {
    this.sealed = true;
  }

  clear(): void {
    this.plain.clear();
    this.int8.clear();
    this.sealed = false;
  }

  /** A norm, bias or plain linear in `dtype` (loadTensor's conversion: bf16 -> f32 -> dtype, f16 range checked). */
  async loadPlain(e: Engine, ckpt: Checkpoint, key: string, shape: readonly number[], dtype: ComputeDType): Promise<Tensor> {
    let h = this.plain.get(key);
    if (h) {
      if (h.dtype !== dtype || !sameShape(h.shape, shape)) throw new Error(`HostWeights: "${key}" is held as ${h.dtype}[${h.shape}], asked as ${dtype}[${shape}]`);
      this.counts.replayed++;
    } else {
      this.miss(key);
      h = { shape: [...shape], dtype, bytes: await hostBytes(ckpt, key, shape, dtype) };
      this.counts.read++;
      this.plain.set(key, h);
    }
    const t = e.empty(h.shape, dtype, key);
    try {
      e.writeBytes(t, 0, h.bytes);
    } catch (err) {
      t.free();
      throw err;
    }
    return t;
  }

  /** A weight-only int8 linear (N, K): quantised once per output channel, the same q and scales every upload. */
  async loadInt8(e: Engine, ckpt: Checkpoint, key: string, shape: readonly [number, number], scaleDtype: ComputeDType): Promise<Int8Weight> {
    let q = this.int8.get(key);
    if (q) {
      if (q.N !== shape[0] || q.K !== shape[1]) throw new Error(`HostWeights: "${key}" is held as int8 (${q.N}, ${q.K}), asked as (${shape})`);
      this.counts.replayed++;
    } else {
      this.miss(key);
      ckpt.entry(key, shape); // shape check with the checkpoint's message
      q = await quantizeInt8FromCheckpoint(ckpt, key, shape[0], shape[1]);
      this.counts.read++;
      this.int8.set(key, q);
    }
    return uploadInt8(e, q, scaleDtype, key);
  }

  private miss(key: string): void {
    if (this.sealed) throw new Error(`HostWeights: "${key}" is not in the host copy (sealed after the first load; nothing is read from the checkpoint again)`);
  }
}

/**
 * The tensor's bytes in `dtype` (F32, F16 or BF16 stored), converted chunk by chunk by load.ts's readConverted: the
 * bytes loadTensor would upload. Shape checked with the checkpoint's message.
 */
export async function hostBytes(ckpt: Checkpoint, key: string, shape: readonly number[], dtype: ComputeDType): Promise<Uint8Array> {
  const entry = ckpt.entry(key, shape);
  if (entry.dtype !== 'F32' && entry.dtype !== 'F16' && entry.dtype !== 'BF16') {
    throw new CheckpointError(`${ckpt.path}: tensor "${key}" is ${entry.dtype}; cannot load it as ${dtype}`);
  }
  const srcElem = entry.dtype === 'F32' ? 4 : 2;
  const out = new Uint8Array((entry.byteLength / srcElem) * DTYPE_BYTES[dtype]);
  await readConverted(ckpt, entry, dtype, (bytes, off) => out.set(bytes, off));
  return out;
}

function sameShape(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((n, i) => n === b[i]);
}
