// The safetensors writer for the checkpoints the project generates (demo, test and planned ones): single files and
// sharded folders with their index, in the format safetensors.ts reads.
import { mkdir, open as openFile, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { encode, f32ToBf16Bits } from './dtype';
import { CheckpointError, INDEX_FILE, SAFE_DTYPE_BYTES, type SafeDType } from './safetensors';
import { fmtShape, numelOf } from './tensor';

export interface WriteTensor {
  dtype: SafeDType;
  shape: number[];
  /** Values (encoded to dtype; F8_E4M3 needs raw bytes), or the raw little-endian bytes; null: no bytes written,
   * a hole in a sparse file that reads as zeros (a plan's checkpoint: the real header, no disk used for data). */
  data: ArrayLike<number> | Uint8Array | null;
}

/** Encodes values to checkpoint bytes. */
export function encodeSafe(values: ArrayLike<number>, dtype: SafeDType): Uint8Array {
  switch (dtype) {
    case 'F32': return encode(values, 'f32');
    case 'F16': return encode(values, 'f16');
    case 'I8': return encode(values, 'i8');
    case 'U8': return Uint8Array.from(values);
    case 'BF16': {
      const h = new Uint16Array(values.length);
      for (let i = 0; i < values.length; i++) h[i] = f32ToBf16Bits(values[i]!);
      return new Uint8Array(h.buffer);
    }
    case 'F8_E4M3':
    case 'F8_E5M2': throw new CheckpointError(`encodeSafe: pass ${dtype} data as raw bytes`);
  }
}

/** Writes one .safetensors file (header padded with spaces to 8 bytes, data in the order given; null data as holes). */
export async function writeSafetensors(path: string, tensors: Record<string, WriteTensor>, metadata?: Record<string, string>): Promise<void> {
  const header: Record<string, unknown> = {};
  if (metadata) header.__metadata__ = metadata;
  const blobs: { off: number; bytes: Uint8Array | null }[] = [];
  let off = 0;
  for (const [name, t] of Object.entries(tensors)) {
    const want = numelOf(t.shape) * SAFE_DTYPE_BYTES[t.dtype];
    const bytes = t.data === null ? null : t.data instanceof Uint8Array ? t.data : encodeSafe(t.data, t.dtype);
    if (bytes && bytes.byteLength !== want) throw new CheckpointError(`writeSafetensors: "${name}" ${t.dtype}${fmtShape(t.shape)} needs ${want} bytes, got ${bytes.byteLength}`);
    header[name] = { dtype: t.dtype, shape: t.shape, data_offsets: [off, off + want] };
    blobs.push({ off, bytes });
    off += want;
  }
  let json = JSON.stringify(header);
  json += ' '.repeat((8 - (Buffer.byteLength(json) % 8)) % 8);
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(Buffer.byteLength(json)));
  await mkdir(dirname(path), { recursive: true });
  const head = Buffer.concat([len, Buffer.from(json)]);
  if (blobs.every((b) => b.bytes)) return writeFile(path, Buffer.concat([head, ...blobs.map((b) => b.bytes!)]));
  const f = await openFile(path, 'w');
  try {
    await f.write(head, 0, head.byteLength, 0);
    for (const b of blobs) if (b.bytes) await f.write(b.bytes, 0, b.bytes.byteLength, head.byteLength + b.off);
    await f.truncate(head.byteLength + off); // the holes: a file of the full size that holds only what was written
  } finally {
    await f.close();
  }
}

/**
 * Writes Hugging Face shards `<stem>-0000i-of-0000n.safetensors` of at most ~maxShardBytes each (key order kept) plus
 * `<stem>.safetensors.index.json` (metadata.total_size, weight_map) in `dir`; `metadata` goes into every shard's
 * header. stem 'model' is transformers' layout, 'diffusion_pytorch_model' diffusers'. Returns the index path.
 */
export async function writeShardedSafetensors(
  dir: string,
  tensors: Record<string, WriteTensor>,
  maxShardBytes: number,
  metadata?: Record<string, string>,
  stem = 'model',
): Promise<string> {
  const shards: Record<string, WriteTensor>[] = [{}];
  let size = 0;
  let total = 0;
  for (const [name, t] of Object.entries(tensors)) {
    const bytes = numelOf(t.shape) * SAFE_DTYPE_BYTES[t.dtype];
    if (size > 0 && size + bytes > maxShardBytes) {
      shards.push({});
      size = 0;
    }
    shards[shards.length - 1]![name] = t;
    size += bytes;
    total += bytes;
  }
  const weightMap: Record<string, string> = {};
  const n = String(shards.length).padStart(5, '0');
  for (let i = 0; i < shards.length; i++) {
    const file = `${stem}-${String(i + 1).padStart(5, '0')}-of-${n}.safetensors`;
    await writeSafetensors(join(dir, file), shards[i]!, metadata);
    for (const name of Object.keys(shards[i]!)) weightMap[name] = file;
  }
  const indexPath = join(dir, `${stem}.safetensors.index.json`);
  await writeFile(indexPath, `${JSON.stringify({ metadata: { total_size: total }, weight_map: weightMap }, null, 2)}\n`);
  return indexPath;
}

/** The shard size that cuts `tensors` into about `n` shards (for writeShardedSafetensors). */
export function shardBytesFor(tensors: Record<string, WriteTensor>, n: number): number {
  const total = Object.values(tensors).reduce((a, t) => a + numelOf(t.shape) * SAFE_DTYPE_BYTES[t.dtype], 0);
  return Math.max(1, Math.ceil(total / n));
}
