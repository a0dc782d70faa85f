// Checkpoint tensors -> GPU tensors, streamed: file chunk (two read buffers taking turns) -> queue.writeBuffer, the
// dtype conversion either on the GPU after a raw upload of the chunk (BF16 -> f16, F32 -> f16, BF16 -> f32 of a
// tensor of GPU_CONVERT_MIN_BYTES or more: ops/convert.ts) or in JS before it (everything else, and host copies:
// readConverted). The whole file is never in JS memory; at most one chunk and its converted copy.
import { bf16BitsToF32, bf16ToF16Table, DTYPE_BYTES, encode, F16_OVERFLOW, f32ToF16Bits, LITTLE_ENDIAN_HOST, type DType } from './dtype';
import type { Engine } from './engine';
import { GGML_TYPES } from './gguf';
import { convertInto, overflowedValue, overflowStatus, type GpuConversion } from './ops/convert';
import { dequantInto, wholeWords } from './ops/dequant';
import { Checkpoint, CheckpointError, SAFE_DTYPE_BYTES, decodeSafe, type SafeDType, type TensorEntry } from './safetensors';
import type { Tensor } from './tensor';

export interface LoadOptions {
  /** GPU dtype. Default: F32 -> f32, F16 -> f16, BF16 -> f32 (bf16's range overflows f16), I8 -> i8,
   * U8 -> f32, F8_E4M3 and F8_E5M2 -> f16 (a scaled fp8 weight reads as F32: pass the dtype to keep it f16).
   * Converting to f16 fails if a value overflows. */
  dtype?: DType;
  /** Expected shape: a mismatch is a CheckpointError naming both shapes. */
  shape?: readonly number[];
  /** Bytes read per chunk (default 8 MiB). */
  chunkBytes?: number;
  /** Where BF16 -> f16, F32 -> f16 and BF16 -> f32 are converted: 'gpu' (the raw chunk uploaded, ops/convert.ts),
   * 'cpu' (in JS, readConverted), or 'auto' (the default): the GPU for a tensor of GPU_CONVERT_MIN_BYTES or more in
   * the file, where its one readback (the overflow check, to f16) costs little beside the work it takes off the
   * main thread. Both give the same bits; other conversions always run on the CPU. */
  convertOn?: 'auto' | 'gpu' | 'cpu';
}

/** Bytes uploaded and converted per dispatch on the GPU conversion path (a read chunk is cut into such pieces; two
 * staging tensors of this size take turns). Small pieces keep the staged bytes in the CPU's cache for lavapipe's
 * kernel and let the upload of one overlap the kernel of the other: measured on lavapipe, 2026-12-07, load average 12
 * to 13, 0.25 GiB of BF16 -> f16 in 1.1 to 1.8 s with 0.5 to 2 MiB pieces, 2.8 to 5.2 s with 8 MiB ones. A multiple of
 * 4 elements of every source dtype, so each piece starts an f16 word. */
export const CONVERT_PIECE_BYTES = 2 ** 20;

/** 'auto' converts a tensor of at least this many file bytes on the GPU (LoadOptions.convertOn). */
export const GPU_CONVERT_MIN_BYTES = 2 ** 20;

const DEFAULT_DTYPE: Record<SafeDType, DType> = { F32: 'f32', F16: 'f16', BF16: 'f32', I8: 'i8', U8: 'f32', F8_E4M3: 'f16', F8_E5M2: 'f16' };
const SAME_BITS: Partial<Record<SafeDType, DType>> = { F32: 'f32', F16: 'f16', I8: 'i8' };

export async function loadTensor(e: Engine, ckpt: Checkpoint, name: string, opts: LoadOptions = {}): Promise<Tensor> {
  const entry = ckpt.entry(name, opts.shape);
  const dtype = opts.dtype ?? DEFAULT_DTYPE[entry.dtype];
  if ((dtype === 'i8') !== (entry.dtype === 'I8')) {
    throw new CheckpointError(`${ckpt.path}: tensor "${name}" is ${entry.dtype}; cannot load it as ${dtype}`);
  }
  const t = e.empty(entry.shape, dtype, name);
  if (e.shapeOnly) return t; // a plan: the tensor's place and size, not its bytes
  try {
    const conv = gpuConversion(entry, dtype, opts.convertOn ?? 'auto');
    if (entry.quant && dtype !== 'i8') await loadBlocks(e, ckpt, entry, t, opts.chunkBytes);
    else if (conv) await loadConverting(e, ckpt, entry, conv, t, opts.chunkBytes);
    else await readConverted(ckpt, entry, dtype, (bytes, dstOffset) => e.writeBytes(t, dstOffset, bytes), opts.chunkBytes);
  } catch (err) {
    t.free();
    throw err;
  }
  return t;
}

/**
 * Streams the tensor of `entry` (the caller's ckpt.entry lookup, shape checked there) converted to `dtype` (same bits passed through, else decoded and re-encoded; a value beyond
 * f16's range fails): `sink` gets each converted chunk and its byte offset in the `dtype` layout. loadTensor writes
 * the chunks to the GPU; a host copy (src/models/common/host-weights.ts) keeps them, so both hold the same bytes.
 */
export async function readConverted(
  ckpt: Checkpoint, entry: TensorEntry, dtype: DType, sink: (bytes: Uint8Array, dstOffset: number) => void, chunkBytes = 8 * 2 ** 20,
): Promise<void> {
  const name = entry.name;
  const srcElem = SAFE_DTYPE_BYTES[entry.dtype];
  // whole multiples of 4 elements, so every converted chunk is 4-byte aligned for writeBuffer
  const elems = Math.max(4, Math.floor(chunkBytes / srcElem / 4) * 4);
  await ckpt.readChunks(name, elems * srcElem, (bytes, off) => {
    const dstOffset = (off / srcElem) * DTYPE_BYTES[dtype];
    if (SAME_BITS[entry.dtype] === dtype) return sink(bytes, dstOffset);
    if (entry.dtype === 'BF16' && dtype === 'f16' && LITTLE_ENDIAN_HOST && bytes.byteOffset % 2 === 0) return sink(bf16ToF16(bytes, ckpt.path, name), dstOffset);
    const values = decodeSafe(bytes, entry.dtype);
    if (dtype === 'f16') checkF16Range(values, ckpt.path, name);
    sink(encode(values, dtype), dstOffset);
  });
}

/** The GPU conversion loadTensor takes for `entry` to `dtype`, or null for the CPU path. */
function gpuConversion(entry: TensorEntry, dtype: DType, on: 'auto' | 'gpu' | 'cpu'): GpuConversion | null {
  if (on === 'cpu' || entry.scaled || entry.quant) return null;
  const conv = `${entry.dtype}->${dtype}`;
  if (conv !== 'BF16->f16' && conv !== 'F32->f16' && conv !== 'BF16->f32') return null;
  return on === 'gpu' || entry.byteLength >= GPU_CONVERT_MIN_BYTES ? conv : null;
}

/** The tensor's file bytes cross to the GPU as stored, read chunk by chunk, uploaded piece by piece through two
 * staging tensors of CONVERT_PIECE_BYTES taking turns, and the convert kernel writes each piece into `t` (the same bits as readConverted's CPU conversion; a finite value beyond f16's range
 * fails the same way, found by one readback after the last chunk). */
async function loadConverting(e: Engine, ckpt: Checkpoint, entry: TensorEntry, conv: GpuConversion, t: Tensor, chunkBytes = 8 * 2 ** 20): Promise<void> {
  const srcElem = SAFE_DTYPE_BYTES[entry.dtype];
  // whole multiples of 4 elements: every chunk but the last starts an f16 word and ends on a 4-byte boundary
  const step = Math.max(4, Math.floor(chunkBytes / srcElem / 4) * 4) * srcElem;
  const piece = Math.min(step, CONVERT_PIECE_BYTES);
  const words = Math.max(1, Math.ceil(Math.min(piece, entry.byteLength) / 4));
  const staging = [e.empty([words], 'f32', `${entry.name} file bytes`)];
  if (entry.byteLength > piece) staging.push(e.empty([words], 'f32', `${entry.name} file bytes`));
  const status = conv === 'BF16->f32' ? undefined : overflowStatus(e, `${entry.name} overflow`);
  let turn = 0;
  try {
    await ckpt.readChunks(entry.name, step, (bytes, off) => {
      for (let o = 0; o < bytes.byteLength; o += piece) {
        // the two staging tensors take turns, so this write need not wait for the previous piece's kernel; writeBytes
        // flushes recorded work first, so the kernel of two pieces ago is on the queue before this write
        const s = staging[turn++ % staging.length]!;
        const part = bytes.subarray(o, o + piece);
        e.writeBytes(s, 0, wholeWords(part));
        convertInto(e, conv, s, part.byteLength / srcElem, t, (off + o) / srcElem, status);
      }
    });
    if (status) {
      const v = await overflowedValue(e, status);
      if (v !== null) throw beyondF16(v, ckpt.path, entry.name);
    }
  } finally {
    for (const s of staging) s.free();
    status?.free();
  }
}

/** A GGUF quantised tensor: its blocks cross to the GPU as stored, chunk by chunk, and the dequant kernel widens them
 * into `t` (f32 or f16; the same values as the CPU's gguf.ts dequantize, which readConverted would use). */
async function loadBlocks(e: Engine, ckpt: Checkpoint, entry: TensorEntry, t: Tensor, chunkBytes = 8 * 2 ** 20): Promise<void> {
  const { type } = entry.quant!;
  const { block, bytes: bs } = GGML_TYPES[type];
  const step = Math.max(bs, Math.floor(Math.min(chunkBytes, entry.quant!.byteLength) / bs) * bs);
  const staging = e.empty([Math.ceil(step / 4) * 4], 'i8', `${entry.name} blocks`);
  try {
    await ckpt.readBlocks(entry.name, step, (bytes, off) => {
      // the kernel of the previous chunk must have read the staging tensor before it is overwritten: writeBytes
      // flushes recorded work first, and the queue runs it before this write
      e.writeBytes(staging, 0, wholeWords(bytes));
      dequantInto(e, type, staging, bytes.byteLength, t, (off / bs) * block);
    });
  } finally {
    staging.free();
  }
}

/** Loads several tensors; on any failure frees the ones already loaded. */
export async function loadTensors(e: Engine, ckpt: Checkpoint, specs: Record<string, LoadOptions>): Promise<Record<string, Tensor>> {
  const out: Record<string, Tensor> = {};
  try {
    for (const [name, o] of Object.entries(specs)) out[name] = await loadTensor(e, ckpt, name, o);
  } catch (err) {
    for (const t of Object.values(out)) t.free();
    throw err;
  }
  return out;
}

/** BF16 bytes -> f16 bytes by table (exact inside f16's range); a finite value beyond it fails as checkF16Range does. */
function bf16ToF16(bytes: Uint8Array, path: string, name: string): Uint8Array {
  const n = bytes.byteLength / 2;
  const src = new Uint16Array(bytes.buffer, bytes.byteOffset, n);
  const out = new Uint16Array(n);
  const t = bf16ToF16Table();
  let bad = -1;
  for (let i = 0; i < n; i++) {
    const h = t[src[i]!]!;
    if ((h & 0x7fff) === F16_OVERFLOW) bad = i;
    out[i] = h;
  }
  if (bad >= 0) throw beyondF16(bf16BitsToF32(src[bad]!), path, name);
  return new Uint8Array(out.buffer);
}

function checkF16Range(values: Float32Array, path: string, name: string): void {
  for (let i = 0; i < values.length; i++) {
    const v = values[i]!;
    if (Number.isFinite(v) && (f32ToF16Bits(v) & 0x7fff) === 0x7c00) {
      throw beyondF16(v, path, name);
    }
  }
}

function beyondF16(v: number, path: string, name: string): CheckpointError {
  return new CheckpointError(`${path}: tensor "${name}" holds ${v}, beyond f16's range (65504); load it as f32`);
}
