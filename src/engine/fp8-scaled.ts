// "fp8 scaled" weights: an F8_E4M3 or F8_E5M2 tensor stored as w / s, with its scale s beside it, as ComfyUI's
// fp8_scaled files (`<layer>.scale_weight`, a `scaled_fp8` marker tensor) and the newer quantised checkpoints
// (`<layer>.weight_scale`) keep them. Read without s the numbers are wrong by s, silently, so a Checkpoint applies
// it: the entry reads as F32 holding fp8 x s, per tensor (a scale of one element) or per output row (a scale of
// shape [rows] or [rows, 1]). A `scaled_fp8` file whose fp8 matrix has no scale, or a scale of another shape, is
// refused by name. An fp8 tensor with no scale and no marker is a plain fp8 tensor and reads as before.
import type { FileHandle } from 'node:fs/promises';
import { bf16BitsToF32, f16BitsToF32, f8e4m3ToF32 } from './dtype';
import type { TensorEntry } from './safetensors';
import { fmtShape, numelOf } from './tensor';

export interface ScaledSource {
  dtype: 'F8_E4M3' | 'F8_E5M2';
  /** The fp8 bytes: absolute offset and length in the entry's file. */
  start: number;
  byteLength: number;
  /** The scale tensor's name and values: one, or one per row of `rowLength` elements. */
  scaleName: string;
  scale: Float32Array;
  rowLength: number;
}

/** The marker tensor ComfyUI writes into an fp8_scaled file. */
export const SCALED_FP8_MARKER = 'scaled_fp8';

/** Where the scale of `name` can be: ComfyUI's `<layer>.scale_weight`, then `<layer>.weight_scale`. */
function scaleNames(name: string): string[] {
  if (!name.endsWith('.weight')) return [`${name}_scale`];
  const layer = name.slice(0, -'.weight'.length);
  return [`${layer}.scale_weight`, `${layer}.weight_scale`];
}

const isFp8 = (e: TensorEntry) => e.dtype === 'F8_E4M3' || e.dtype === 'F8_E5M2';

let e4m3: Float32Array | undefined;
let e5m2: Float32Array | undefined;
/** fp8 byte -> value, by table. */
function fp8Table(dtype: ScaledSource['dtype']): Float32Array {
  if (dtype === 'F8_E4M3') return (e4m3 ??= Float32Array.from({ length: 256 }, (_, b) => f8e4m3ToF32(b)));
  return (e5m2 ??= Float32Array.from({ length: 256 }, (_, b) => f16BitsToF32(b << 8))); // e5m2 is f16's top byte
}

/** Errors are the caller's kind (safetensors.ts passes CheckpointError's constructor: this file cannot import it back). */
export type Fail = (message: string) => Error;

async function readScale(path: string, handle: FileHandle, s: TensorEntry, fail: Fail): Promise<Float32Array> {
  const bytes = Buffer.alloc(s.byteLength);
  await handle.read(bytes, 0, s.byteLength, s.start);
  const n = numelOf(s.shape);
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  switch (s.dtype) {
    case 'F32': return Float32Array.from({ length: n }, (_, i) => dv.getFloat32(i * 4, true));
    case 'F16': return Float32Array.from({ length: n }, (_, i) => f16BitsToF32(dv.getUint16(i * 2, true)));
    case 'BF16': return Float32Array.from({ length: n }, (_, i) => bf16BitsToF32(dv.getUint16(i * 2, true)));
    default: throw fail(`${path}: scale "${s.name}" is ${s.dtype}; expected F32, F16 or BF16`);
  }
}

/** `entries` with each scaled fp8 tensor turned into its F32 view (Checkpoint.open calls it once per checkpoint). */
export async function attachFp8Scales(
  path: string, entries: Map<string, TensorEntry>, handleOf: (e: TensorEntry) => FileHandle, fail: Fail,
): Promise<Map<string, TensorEntry>> {
  // ComfyUI writes the marker under the model's key prefix (model.diffusion_model.scaled_fp8) in its diffusion_models files
  const isMarker = (n: string) => n === SCALED_FP8_MARKER || n.endsWith(`.${SCALED_FP8_MARKER}`);
  const marked = [...entries.keys()].some(isMarker);
  for (const e of [...entries.values()]) {
    if (!isFp8(e) || isMarker(e.name)) continue;
    const scaleName = scaleNames(e.name).find((n) => entries.has(n));
    if (!scaleName) {
      if (marked && e.shape.length >= 2) {
        throw fail(`${path}: "${e.name}" is ${e.dtype} in a scaled_fp8 file but has no scale (${scaleNames(e.name).join(' or ')}): its values would be wrong by that scale`);
      }
      continue;
    }
    const s = entries.get(scaleName)!;
    const rows = e.shape[0] ?? 1;
    const n = numelOf(s.shape);
    const perRow = e.shape.length >= 1 && n === rows && (s.shape.length === 1 || (s.shape.length === 2 && s.shape[1] === 1));
    if (n !== 1 && !perRow) {
      throw fail(`${path}: scale "${scaleName}" of ${e.dtype}${fmtShape(e.shape)} "${e.name}" is ${fmtShape(s.shape)}; expected one value or one per row ([${rows}] or [${rows}, 1])`);
    }
    const scale = await readScale(path, handleOf(s), s, fail);
    const numel = numelOf(e.shape);
    entries.set(e.name, {
      ...e, dtype: 'F32', byteLength: numel * 4,
      scaled: { dtype: e.dtype as ScaledSource['dtype'], start: e.start, byteLength: e.byteLength, scaleName, scale, rowLength: n === 1 ? numel || 1 : numel / rows },
    });
  }
  return entries;
}

/** Checkpoint.readChunks of a scaled entry: F32 chunks of fp8 x scale, offsets in the F32 layout. */
export async function readScaledChunks(
  handle: FileHandle, e: TensorEntry, chunkBytes: number, onChunk: (bytes: Uint8Array, byteOffset: number) => void | Promise<void>, fail: Fail,
): Promise<void> {
  const src = e.scaled!;
  const table = fp8Table(src.dtype);
  const step = Math.max(1, Math.floor(chunkBytes / 4)); // fp8 elements per chunk
  const raw = Buffer.allocUnsafe(Math.min(step, src.byteLength));
  const out = new Float32Array(raw.length);
  for (let off = 0; off < src.byteLength; off += step) {
    const len = Math.min(step, src.byteLength - off);
    const { bytesRead } = await handle.read(raw, 0, len, src.start + off);
    if (bytesRead !== len) throw fail(`${e.file}: tensor "${e.name}" truncated at byte ${src.start + off + bytesRead}`);
    for (let i = 0; i < len; i++) out[i] = table[raw[i]!]! * src.scale[Math.floor((off + i) / src.rowLength)]!;
    await onChunk(new Uint8Array(out.buffer, 0, len * 4), off * 4);
  }
}
