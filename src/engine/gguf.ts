// GGUF checkpoints (the format llama.cpp and city96's ComfyUI-GGUF conversions of diffusion models use): the header
// and tensor infos are parsed by @huggingface/gguf (the maintained parser), the tensor bytes are read from the file at
// their offsets, and quantised types are dequantised here. A Checkpoint opened on a .gguf file (safetensors.ts) shows
// each tensor under its own name (city96's convert.py writes the model's state-dict keys, ComfyUI's
// model.diffusion_model. prefix removed) in PyTorch's dimension order (GGUF lists the fastest dimension first), F32,
// F16 and BF16 as stored and every quantised type as F32, dequantised as it is streamed.
//
// The block layouts are ggml's (ggml-common.h; dequantize_row_* in ggml-quants.c), little-endian, d/m in fp16:
//   Q8_0  32 values, 34 bytes: d, qs[32] int8                                y = d * q
//   Q4_0  32 values, 18 bytes: d, qs[16] (low nibbles: values 0..15, high: 16..31)    y = d * (q - 8)
//   Q4_1  32 values, 20 bytes: d, m, qs[16]                                  y = d * q + m
//   Q5_0  32 values, 22 bytes: d, qh (u32: bit j is value j's 5th bit), qs[16]        y = d * (q - 16)
//   Q5_1  32 values, 24 bytes: d, m, qh, qs[16]                              y = d * q + m
//   Q4_K 256 values, 144 bytes: d, dmin, scales[12] (8 6-bit scales and mins), qs[128]; per 64 values two sub-blocks
//        of 32 (low nibbles, then high) with y = d * sc * q - dmin * mn
//   Q5_K 256 values, 176 bytes: d, dmin, scales[12], qh[32] (bit pair 2i, 2i+1 for the i-th 64), qs[128]
//   Q6_K 256 values, 210 bytes: ql[128], qh[64], scales[16] int8, d; per 128 values four rows of 32 with
//        y = d * sc * (q - 32), q = 4 low bits of ql | 2 bits of qh << 4
// Products are float32 as in ggml (Math.fround at each step): the WGSL kernels (shaders/dequant.wgsl) compute the same.
import type { FileHandle } from 'node:fs/promises';
import { gguf } from '@huggingface/gguf';
import { f16BitsToF32 } from './dtype';

/** The GGML tensor types Kiln reads, by their GGUF type id (ggml.h's enum ggml_type). */
export const GGML_TYPES = {
  F32: { id: 0, block: 1, bytes: 4 },
  F16: { id: 1, block: 1, bytes: 2 },
  Q4_0: { id: 2, block: 32, bytes: 18 },
  Q4_1: { id: 3, block: 32, bytes: 20 },
  Q5_0: { id: 6, block: 32, bytes: 22 },
  Q5_1: { id: 7, block: 32, bytes: 24 },
  Q8_0: { id: 8, block: 32, bytes: 34 },
  Q4_K: { id: 12, block: 256, bytes: 144 },
  Q5_K: { id: 13, block: 256, bytes: 176 },
  Q6_K: { id: 14, block: 256, bytes: 210 },
  BF16: { id: 30, block: 1, bytes: 2 },
} as const;

export type GgmlType = keyof typeof GGML_TYPES;
/** The quantised ones: read as F32, dequantised block by block. */
export type GgmlQuant = Exclude<GgmlType, 'F32' | 'F16' | 'BF16'>;
export const GGML_QUANTS: readonly GgmlQuant[] = ['Q8_0', 'Q4_0', 'Q4_1', 'Q5_0', 'Q5_1', 'Q4_K', 'Q5_K', 'Q6_K'];

const BY_ID = new Map<number, GgmlType>(Object.entries(GGML_TYPES).map(([n, t]) => [t.id, n as GgmlType]));

/** The type of a GGUF type id, or undefined when Kiln cannot read it. */
export const ggmlTypeOf = (id: number): GgmlType | undefined => BY_ID.get(id);

/** Bytes of `numel` values of `type` (whole blocks). */
export function ggmlBytes(type: GgmlType, numel: number): number {
  const t = GGML_TYPES[type];
  return (numel / t.block) * t.bytes;
}

const fr = Math.fround;

/** 6-bit scale and min j (0..7) of a K-quant's 12 scale bytes at `o` (ggml's get_scale_min_k4). */
function scaleMinK4(b: Uint8Array, o: number, j: number): [number, number] {
  if (j < 4) return [b[o + j]! & 63, b[o + j + 4]! & 63];
  return [(b[o + j + 4]! & 0xf) | ((b[o + j - 4]! >> 6) << 4), (b[o + j + 4]! >> 4) | ((b[o + j]! >> 6) << 4)];
}

/**
 * `blocks` whole blocks of `type` in `src` -> float32 values in `out` from `outOffset` (the reference: ggml's
 * dequantize_row_* step for step, float32 arithmetic). `src` holds the blocks back to back from its byteOffset.
 */
export function dequantize(type: GgmlQuant, src: Uint8Array, out: Float32Array, outOffset = 0): Float32Array {
  const { block: QK, bytes: BS } = GGML_TYPES[type];
  const nb = Math.floor(src.byteLength / BS);
  const h = (o: number) => f16BitsToF32(src[o]! | (src[o + 1]! << 8));
  for (let i = 0; i < nb; i++) {
    const o = i * BS;
    const y = outOffset + i * QK;
    switch (type) {
      case 'Q8_0': {
        const d = h(o);
        for (let j = 0; j < 32; j++) out[y + j] = fr(d * ((src[o + 2 + j]! << 24) >> 24));
        break;
      }
      case 'Q4_0':
      case 'Q4_1': {
        const d = h(o);
        const m = type === 'Q4_1' ? h(o + 2) : 0;
        const qs = o + (type === 'Q4_1' ? 4 : 2);
        for (let j = 0; j < 16; j++) {
          const b = src[qs + j]!;
          if (type === 'Q4_0') {
            out[y + j] = fr(((b & 0xf) - 8) * d);
            out[y + j + 16] = fr(((b >> 4) - 8) * d);
          } else {
            out[y + j] = fr(fr((b & 0xf) * d) + m);
            out[y + j + 16] = fr(fr((b >> 4) * d) + m);
          }
        }
        break;
      }
      case 'Q5_0':
      case 'Q5_1': {
        const one = type === 'Q5_1';
        const d = h(o);
        const m = one ? h(o + 2) : 0;
        const qhAt = o + (one ? 4 : 2);
        const qh = (src[qhAt]! | (src[qhAt + 1]! << 8) | (src[qhAt + 2]! << 16) | (src[qhAt + 3]! << 24)) >>> 0;
        const qs = qhAt + 4;
        for (let j = 0; j < 16; j++) {
          const b = src[qs + j]!;
          const x0 = (b & 0xf) | (((qh >>> j) << 4) & 0x10);
          const x1 = (b >> 4) | ((qh >>> (j + 12)) & 0x10);
          if (one) {
            out[y + j] = fr(fr(x0 * d) + m);
            out[y + j + 16] = fr(fr(x1 * d) + m);
          } else {
            out[y + j] = fr((x0 - 16) * d);
            out[y + j + 16] = fr((x1 - 16) * d);
          }
        }
        break;
      }
      case 'Q4_K':
      case 'Q5_K': {
        const five = type === 'Q5_K';
        const d = h(o);
        const dmin = h(o + 2);
        const sc = o + 4;
        const qh = o + 16; // Q5_K only
        let ql = o + (five ? 48 : 16);
        let u1 = 1;
        let u2 = 2;
        let yy = y;
        for (let j = 0, is = 0; j < 256; j += 64, is += 2) {
          const [s1, m1v] = scaleMinK4(src, sc, is);
          const [s2, m2v] = scaleMinK4(src, sc, is + 1);
          const d1 = fr(d * s1);
          const m1 = fr(dmin * m1v);
          const d2 = fr(d * s2);
          const m2 = fr(dmin * m2v);
          for (let l = 0; l < 32; l++) out[yy + l] = fr(fr(d1 * ((src[ql + l]! & 0xf) + (five && src[qh + l]! & u1 ? 16 : 0))) - m1);
          for (let l = 0; l < 32; l++) out[yy + 32 + l] = fr(fr(d2 * ((src[ql + l]! >> 4) + (five && src[qh + l]! & u2 ? 16 : 0))) - m2);
          ql += 32;
          yy += 64;
          u1 <<= 2;
          u2 <<= 2;
        }
        break;
      }
      case 'Q6_K': {
        const d = h(o + 208);
        let ql = o;
        let qh = o + 128;
        let sc = o + 192;
        let yy = y;
        const s8 = (k: number) => (src[k]! << 24) >> 24;
        for (let n = 0; n < 256; n += 128) {
          for (let l = 0; l < 32; l++) {
            const is = l >> 4;
            const hb = src[qh + l]!;
            const q1 = ((src[ql + l]! & 0xf) | ((hb & 3) << 4)) - 32;
            const q2 = ((src[ql + l + 32]! & 0xf) | (((hb >> 2) & 3) << 4)) - 32;
            const q3 = ((src[ql + l]! >> 4) | (((hb >> 4) & 3) << 4)) - 32;
            const q4 = ((src[ql + l + 32]! >> 4) | (((hb >> 6) & 3) << 4)) - 32;
            out[yy + l] = fr(fr(d * s8(sc + is)) * q1);
            out[yy + l + 32] = fr(fr(d * s8(sc + is + 2)) * q2);
            out[yy + l + 64] = fr(fr(d * s8(sc + is + 4)) * q3);
            out[yy + l + 96] = fr(fr(d * s8(sc + is + 6)) * q4);
          }
          yy += 128;
          ql += 64;
          qh += 32;
          sc += 8;
        }
        break;
      }
    }
  }
  return out;
}

/** A quantised tensor's source in its file: the entry reads as F32 (numel x 4 bytes), dequantised as it streams. */
export interface QuantSource {
  type: GgmlQuant;
  /** Absolute offset and length of the blocks in the entry's file. */
  start: number;
  byteLength: number;
}

/** Checkpoint.readChunks of a quantised entry: F32 chunks of whole blocks, offsets in the F32 layout. */
export async function readQuantChunks(
  handle: FileHandle,
  e: { name: string; file: string; quant?: QuantSource },
  chunkBytes: number,
  onChunk: (bytes: Uint8Array, byteOffset: number) => void | Promise<void>,
  fail: (message: string) => Error,
): Promise<void> {
  const src = e.quant!;
  const { block, bytes } = GGML_TYPES[src.type];
  const blocksPer = Math.max(1, Math.floor(chunkBytes / (block * 4)));
  const raw = Buffer.allocUnsafe(Math.min(blocksPer * bytes, src.byteLength));
  const out = new Float32Array(Math.min(blocksPer, src.byteLength / bytes) * block);
  for (let off = 0; off < src.byteLength; off += blocksPer * bytes) {
    const len = Math.min(blocksPer * bytes, src.byteLength - off);
    const { bytesRead } = await handle.read(raw, 0, len, src.start + off);
    if (bytesRead !== len) throw fail(`${e.file}: tensor "${e.name}" truncated at byte ${src.start + off + bytesRead}`);
    dequantize(src.type, raw.subarray(0, len), out, 0);
    const n = (len / bytes) * block;
    await onChunk(new Uint8Array(out.buffer, 0, n * 4), (off / bytes) * block * 4);
  }
}

/** What Checkpoint.open needs of a .gguf file: its tensors as entries, its metadata as strings, the open handle. */
export interface GgufContents<E> {
  entries: Map<string, E>;
  metadata: Record<string, string>;
}

/** The metadata key city96's convert.py writes for a tensor it had to store in another shape (5-D and larger). */
export const GGUF_ORIG_SHAPE = 'comfy.gguf.orig_shape.';

/**
 * Parses a .gguf file's header with @huggingface/gguf and lists its tensors as Checkpoint entries (shape in PyTorch's
 * order; F32/F16/BF16 as stored; quantised types as F32 with a `quant` source). A tensor of a type Kiln cannot read
 * is refused by name with the types it can; `fail` makes the caller's error kind.
 */
export async function readGgufContents(path: string, fileSize: number, fail: (message: string) => Error): Promise<GgufContents<{
  name: string; dtype: 'F32' | 'F16' | 'BF16'; shape: number[]; file: string; start: number; byteLength: number; quant?: QuantSource;
}>> {
  let parsed;
  try {
    parsed = await gguf(path, { allowLocalFile: true });
  } catch (e) {
    throw fail(`${path}: not a readable GGUF file (${(e as Error).message})`);
  }
  if (!parsed.littleEndian) throw fail(`${path}: a big-endian GGUF file; Kiln reads little-endian ones`);
  const metadata: Record<string, string> = {};
  for (const [k, v] of Object.entries(parsed.metadata)) {
    if (typeof v === 'string' || typeof v === 'number' || typeof v === 'bigint' || typeof v === 'boolean') metadata[k] = String(v);
    else if (Array.isArray(v) && v.length <= 16) metadata[k] = JSON.stringify(v, (_k, x: unknown) => (typeof x === 'bigint' ? Number(x) : x));
  }
  const dataStart = Number(parsed.tensorDataOffset);
  const entries = new Map<string, { name: string; dtype: 'F32' | 'F16' | 'BF16'; shape: number[]; file: string; start: number; byteLength: number; quant?: QuantSource }>();
  for (const t of parsed.tensorInfos) {
    const type = ggmlTypeOf(Number(t.dtype));
    if (!type) {
      throw fail(`${path}: tensor "${t.name}" is GGML type ${t.dtype}; Kiln reads ${Object.keys(GGML_TYPES).join(', ')}`);
    }
    const ggufShape = t.shape.map(Number);
    let shape = [...ggufShape].reverse(); // GGUF lists ne[0] (the fastest) first
    const numel = shape.reduce((a, n) => a * n, 1);
    const orig = metadata[`${GGUF_ORIG_SHAPE}${t.name}`];
    if (orig !== undefined) {
      const o = (JSON.parse(orig) as number[]).map(Number);
      if (o.reduce((a, n) => a * n, 1) !== numel) throw fail(`${path}: tensor "${t.name}": ${GGUF_ORIG_SHAPE}${t.name} = [${o}] does not hold its ${numel} values`);
      shape = o;
    }
    const { block } = GGML_TYPES[type];
    if ((ggufShape[0] ?? 1) % block !== 0) throw fail(`${path}: tensor "${t.name}" ${type} has rows of ${ggufShape[0]} values, not whole blocks of ${block}`);
    const byteLength = ggmlBytes(type, numel);
    const start = dataStart + Number(t.offset);
    if (start + byteLength > fileSize) throw fail(`${path}: tensor "${t.name}": data ends at byte ${start + byteLength} but the file has ${fileSize}: truncated`);
    if (type === 'F32' || type === 'F16' || type === 'BF16') entries.set(t.name, { name: t.name, dtype: type, shape, file: path, start, byteLength });
    else entries.set(t.name, { name: t.name, dtype: 'F32', shape, file: path, start: 0, byteLength: numel * 4, quant: { type, start, byteLength } });
  }
  return { entries, metadata };
}

// ---- writer (tests and tools: a GGUF file as city96's convert.py lays one out) ----

export interface GgufWriteTensor {
  type: GgmlType;
  /** PyTorch order (outermost first); written reversed, as GGUF lists dimensions. */
  shape: number[];
  /** The stored bytes: whole blocks for a quantised type. */
  data: Uint8Array;
  /** Written as this GGUF type id instead of `type`'s (tests: a type Kiln cannot read). */
  typeId?: number;
}

/** A GGUF v3 file: string metadata, tensor infos, data aligned to 32 bytes (general.alignment's default). */
export function ggufBytes(tensors: Record<string, GgufWriteTensor>, metadata: Record<string, string> = {}): Buffer {
  const parts: Buffer[] = [];
  const u32 = (v: number) => { const b = Buffer.alloc(4); b.writeUInt32LE(v); return b; };
  const u64 = (v: number) => { const b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt(v)); return b; };
  const str = (s: string) => { const b = Buffer.from(s, 'utf8'); return Buffer.concat([u64(b.length), b]); };
  const names = Object.keys(tensors);
  parts.push(Buffer.from('GGUF'), u32(3), u64(names.length), u64(Object.keys(metadata).length));
  for (const [k, v] of Object.entries(metadata)) parts.push(str(k), u32(8 /* STRING */), str(v));
  let off = 0;
  const offsets: number[] = [];
  for (const n of names) {
    const t = tensors[n]!;
    const numel = t.shape.reduce((a, x) => a * x, 1);
    if (t.data.byteLength !== ggmlBytes(t.type, numel)) throw new RangeError(`ggufBytes: "${n}" ${t.type}[${t.shape}] needs ${ggmlBytes(t.type, numel)} bytes, got ${t.data.byteLength}`);
    parts.push(str(n), u32(t.shape.length), ...[...t.shape].reverse().map(u64), u32(t.typeId ?? GGML_TYPES[t.type].id), u64(off));
    offsets.push(off);
    off += Math.ceil(t.data.byteLength / 32) * 32;
  }
  let head = Buffer.concat(parts);
  head = Buffer.concat([head, Buffer.alloc((32 - (head.length % 32)) % 32)]);
  const data = Buffer.alloc(off);
  names.forEach((n, i) => data.set(tensors[n]!.data, offsets[i]!));
  return Buffer.concat([head, data]);
}
