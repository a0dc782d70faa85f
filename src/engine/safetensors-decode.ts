// Checkpoint element types and their decoding to float32: the dtypes safetensors files carry (and GGUF/fp8 entries
// read as), bytes -> float32 in whole elements, and a whole tensor read through any chunked source (Checkpoint or a
// stand-in such as the demos' SyntheticCheckpoint). Split from safetensors.ts, which re-exports all of it.
import { bf16BitsToF32 as bf16, f16BitsToF32 as f16, f16Table, f8e4m3ToF32 as f8, LITTLE_ENDIAN_HOST } from './dtype';
import type { TensorEntry } from './safetensors';
import type { SourceIdentity } from './source-identity';
import { numelOf } from './tensor';

export type SafeDType = 'F32' | 'F16' | 'BF16' | 'I8' | 'U8' | 'F8_E4M3' | 'F8_E5M2';
export const SAFE_DTYPE_BYTES: Readonly<Record<SafeDType, number>> = { F32: 4, F16: 2, BF16: 2, I8: 1, U8: 1, F8_E4M3: 1, F8_E5M2: 1 };

/** What readWholeFloat32 needs of a checkpoint: Checkpoint, or a stand-in such as the demos' SyntheticCheckpoint. */
export interface ChunkSource {
  entry(name: string): TensorEntry;
  readChunks(name: string, chunkBytes: number, onChunk: (bytes: Uint8Array, byteOffset: number) => void | Promise<void>): Promise<void>;
  /** Where tensor `name` comes from and what its values depend on (int8-cache.ts); absent or null: not cacheable. */
  sourceIdentity?(name: string): Promise<SourceIdentity | null>;
}

/** Tensor `name` of `src`, decoded whole to float32 in 1 MiB chunks (small tensors: tests, CPU-side tables). */
export async function readWholeFloat32(src: ChunkSource, name: string): Promise<Float32Array> {
  const e = src.entry(name);
  const out = new Float32Array(numelOf(e.shape));
  const elem = SAFE_DTYPE_BYTES[e.dtype];
  await src.readChunks(name, 1 << 20, (bytes, off) => out.set(decodeSafe(bytes, e.dtype), off / elem));
  return out;
}

/** Checkpoint bytes (whole elements) -> float32 values. */
export function decodeSafe(bytes: Uint8Array, dtype: SafeDType): Float32Array {
  const n = bytes.byteLength / SAFE_DTYPE_BYTES[dtype];
  const fast = decodeAligned(bytes, dtype, n);
  if (fast) return fast;
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out = new Float32Array(n);
  switch (dtype) {
    case 'F32': for (let i = 0; i < n; i++) out[i] = dv.getFloat32(i * 4, true); break;
    case 'F16': for (let i = 0; i < n; i++) out[i] = f16(dv.getUint16(i * 2, true)); break;
    case 'BF16': for (let i = 0; i < n; i++) out[i] = bf16(dv.getUint16(i * 2, true)); break;
    case 'I8': for (let i = 0; i < n; i++) out[i] = dv.getInt8(i); break;
    case 'U8': for (let i = 0; i < n; i++) out[i] = dv.getUint8(i); break;
    case 'F8_E4M3': for (let i = 0; i < n; i++) out[i] = f8(dv.getUint8(i)); break;
    case 'F8_E5M2': for (let i = 0; i < n; i++) out[i] = f16(dv.getUint8(i) << 8); break; // e5m2 is f16's top byte
  }
  return out;
}

/**
 * decodeSafe through typed-array views where the bytes sit on an element boundary of a little-endian host: F32 a
 * copy, F16 a table read per element, BF16 a shift into the float's top half. Null: take the DataView loop.
 */
function decodeAligned(bytes: Uint8Array, dtype: SafeDType, n: number): Float32Array | null {
  if (!LITTLE_ENDIAN_HOST) return null;
  if (dtype === 'F32' && bytes.byteOffset % 4 === 0) return new Float32Array(new Float32Array(bytes.buffer, bytes.byteOffset, n));
  if ((dtype !== 'F16' && dtype !== 'BF16') || bytes.byteOffset % 2 !== 0) return null;
  const h = new Uint16Array(bytes.buffer, bytes.byteOffset, n);
  const out = new Float32Array(n);
  if (dtype === 'F16') {
    const t = f16Table();
    for (let i = 0; i < n; i++) out[i] = t[h[i]!]!;
  } else {
    const bits = new Uint32Array(out.buffer);
    for (let i = 0; i < n; i++) bits[i] = h[i]! << 16;
  }
  return out;
}
