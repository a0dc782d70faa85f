// safetensors checkpoints: header parsing, single files and sharded ones (model.safetensors.index.json),
// chunked reads straight from the file (the writer for the checkpoints the project generates: safetensors-writer.ts).
// Format: u64 LE header length N | N bytes of JSON {name: {dtype, shape, data_offsets: [begin, end]},
// "__metadata__": {str: str}} | data (offsets are relative to the end of the header).
// GPU upload lives in load.ts; this file has no GPU dependency. Element types and decoding: safetensors-decode.ts
// (re-exported here, so importers keep one name to import from).
import { open as openFile, type FileHandle } from 'node:fs/promises';
import { createHash } from 'node:crypto';
import { existsSync, realpathSync, statSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { decodeSafe, readWholeFloat32, SAFE_DTYPE_BYTES, type ChunkSource, type SafeDType } from './safetensors-decode';
import { attachFp8Scales, readScaledChunks, type ScaledSource } from './fp8-scaled';
import { fileIdentity, type SourceIdentity } from './source-identity';
import { GGML_TYPES, readGgufContents, readQuantChunks, type QuantSource } from './gguf';
import { fmtShape, numelOf } from './tensor';

export { decodeSafe, readWholeFloat32, SAFE_DTYPE_BYTES, type ChunkSource, type SafeDType };


export interface TensorEntry {
  name: string;
  dtype: SafeDType;
  shape: number[];
  /** The shard holding it. */
  file: string;
  /** Absolute byte offset of the data in the file. */
  start: number;
  byteLength: number;
  /** An fp8 weight with its scale (fp8-scaled.ts): the entry reads as F32, each value times its scale; these are the
   * stored bytes. */
  scaled?: ScaledSource;
  /** A GGUF quantised tensor (gguf.ts): the entry reads as F32, dequantised block by block; these are the blocks. */
  quant?: QuantSource;
}

const checkpointError = (message: string) => new CheckpointError(message);

/** A checkpoint is unreadable, or lacks what a model asked for. */
export class CheckpointError extends Error {
  override readonly name = 'CheckpointError';
}

const MAX_HEADER = 100 * 2 ** 20;
export const INDEX_FILE = 'model.safetensors.index.json';

/** One .safetensors file: the parsed header and an open handle. */
export class SafetensorsFile {
  private constructor(
    readonly path: string,
    readonly handle: FileHandle,
    readonly entries: Map<string, TensorEntry>,
    readonly metadata: Record<string, string>,
  ) {}

  static async open(path: string): Promise<SafetensorsFile> {
    const handle = await openFile(path, 'r').catch((e: Error) => {
      throw new CheckpointError(`${path}: cannot open (${e.message})`);
    });
    try {
      const size = (await handle.stat()).size;
      if (size < 8) throw new CheckpointError(`${path}: not a safetensors file (${size} bytes)`);
      const lenBuf = Buffer.alloc(8);
      await handle.read(lenBuf, 0, 8, 0);
      const n = Number(lenBuf.readBigUInt64LE(0));
      if (n > MAX_HEADER || 8 + n > size) {
        throw new CheckpointError(`${path}: header length ${n} does not fit the file (${size} bytes): truncated or not safetensors`);
      }
      const head = Buffer.alloc(n);
      await handle.read(head, 0, n, 8);
      let json: unknown;
      try {
        json = JSON.parse(head.toString('utf8'));
      } catch (e) {
        throw new CheckpointError(`${path}: header is not valid JSON (${(e as Error).message})`);
      }
      if (!json || typeof json !== 'object' || Array.isArray(json)) throw new CheckpointError(`${path}: header is not a JSON object`);
      const entries = new Map<string, TensorEntry>();
      let metadata: Record<string, string> = {};
      for (const [name, v] of Object.entries(json as Record<string, unknown>)) {
        if (name === '__metadata__') {
          metadata = (v ?? {}) as Record<string, string>;
          continue;
        }
        entries.set(name, parseEntry(path, name, v, 8 + n, size));
      }
      return new SafetensorsFile(path, handle, entries, metadata);
    } catch (e) {
      await handle.close();
      throw e;
    }
  }

  close(): Promise<void> {
    return this.handle.close();
  }
}

function parseEntry(path: string, name: string, v: unknown, dataStart: number, fileSize: number): TensorEntry {
  const bad = (why: string) => new CheckpointError(`${path}: tensor "${name}": ${why}`);
  const e = v as { dtype?: unknown; shape?: unknown; data_offsets?: unknown };
  if (!e || typeof e !== 'object') throw bad('entry is not an object');
  if (typeof e.dtype !== 'string' || !(e.dtype in SAFE_DTYPE_BYTES)) {
    throw bad(`dtype ${JSON.stringify(e.dtype)} is not supported (${Object.keys(SAFE_DTYPE_BYTES).join(', ')})`);
  }
  const dtype = e.dtype as SafeDType;
  if (!Array.isArray(e.shape) || !e.shape.every((x) => Number.isInteger(x) && x >= 0)) throw bad(`bad shape ${JSON.stringify(e.shape)}`);
  const off = e.data_offsets;
  if (!Array.isArray(off) || off.length !== 2 || !off.every((x) => Number.isInteger(x) && x >= 0) || off[1] < off[0]) {
    throw bad(`bad data_offsets ${JSON.stringify(off)}`);
  }
  const shape = e.shape as number[];
  const byteLength = off[1] - off[0];
  if (byteLength !== numelOf(shape) * SAFE_DTYPE_BYTES[dtype]) {
    throw bad(`${dtype}${fmtShape(shape)} needs ${numelOf(shape) * SAFE_DTYPE_BYTES[dtype]} bytes, data_offsets give ${byteLength}`);
  }
  if (dataStart + off[1] > fileSize) {
    throw bad(`data ends at byte ${dataStart + off[1]} but the file has ${fileSize}: truncated`);
  }
  return { name, dtype, shape, file: path, start: dataStart + off[0], byteLength };
}

/** A checkpoint: one file, or the shards named by model.safetensors.index.json. */
/** Rows [from, to) of a tensor, read as a tensor named `name` (Checkpoint.renamed). */
export interface RowPart {
  name: string;
  rows: [number, number];
}

/** The entry of rows [from, to) of `e` (its first axis): the same bytes, a row range of them, for stored, fp8-scaled
 * (a per-row scale cut to the range) and GGUF entries (whole blocks per row) alike. */
export function entryRows(e: TensorEntry, from: number, to: number, path: string): TensorEntry {
  const rows = e.shape[0] ?? 0;
  if (!(e.shape.length >= 1 && Number.isInteger(from) && Number.isInteger(to) && from >= 0 && from < to && to <= rows)) {
    throw new CheckpointError(`${path}: rows ${from}..${to} of "${e.name}" ${e.dtype}${fmtShape(e.shape)} do not exist`);
  }
  const shape = [to - from, ...e.shape.slice(1)];
  const cut = (start: number, byteLength: number) => ({ start: start + (byteLength / rows) * from, byteLength: (byteLength / rows) * (to - from) });
  const out: TensorEntry = { ...e, shape, ...cut(e.start, e.byteLength) };
  if (e.scaled) {
    const s = e.scaled;
    const perRow = s.scale.length === rows && rows > 1;
    const numel = numelOf(shape);
    out.scaled = { ...s, ...cut(s.start, s.byteLength), scale: perRow ? s.scale.subarray(from, to) : s.scale, rowLength: perRow ? s.rowLength : numel || 1 };
  }
  if (e.quant) {
    if (e.quant.byteLength % rows !== 0) throw new CheckpointError(`${path}: "${e.name}" (${e.quant.type}) has no whole blocks per row, so its rows cannot be read apart`);
    out.quant = { ...e.quant, ...cut(e.quant.start, e.quant.byteLength) };
  }
  return out;
}

export class Checkpoint {
  /** Tensors the index names in shards that are not on disk -> their shard. */
  private absent = new Map<string, string>();

  private constructor(
    readonly path: string,
    private readonly files: Map<string, Pick<SafetensorsFile, 'handle' | 'close'>>,
    readonly entries: Map<string, TensorEntry>,
    readonly metadata: Record<string, string>,
  ) {}

  /** `path`: a .safetensors file, an index .json, a .gguf file (gguf.ts), or a folder holding a safetensors one. */
  static async open(path: string): Promise<Checkpoint> {
    let p = path;
    if (p.endsWith('.gguf')) return Checkpoint.openGguf(p);
    if (existsSync(p) && statSync(p).isDirectory()) {
      if (existsSync(join(p, INDEX_FILE))) p = join(p, INDEX_FILE);
      else if (existsSync(join(p, 'model.safetensors'))) p = join(p, 'model.safetensors');
      else throw new CheckpointError(`${path}: no ${INDEX_FILE} or model.safetensors in this folder`);
    }
    if (!p.endsWith('.json')) {
      const f = await SafetensorsFile.open(p);
      try {
        return new Checkpoint(p, new Map([[p, f]]), await attachFp8Scales(p, new Map(f.entries), () => f.handle, checkpointError), f.metadata);
      } catch (e) {
        await f.close();
        throw e;
      }
    }
    const index = await readIndex(p);
    const files = new Map<string, SafetensorsFile>();
    const entries = new Map<string, TensorEntry>();
    // A shard not on disk is one the model never reads (the weights manifest's `reads`: H3 stops at text encoder
    // layer 49 of 64): its tensors are left out, and asking for one names the shard.
    const absent = new Map<string, string>();
    try {
      for (const shard of new Set(Object.values(index.weight_map))) {
        const sp = join(dirname(p), shard);
        if (existsSync(sp)) files.set(sp, await SafetensorsFile.open(sp));
      }
      for (const [name, shard] of Object.entries(index.weight_map)) {
        const file = files.get(join(dirname(p), shard));
        if (!file) {
          absent.set(name, shard);
          continue;
        }
        const entry = file.entries.get(name);
        if (!entry) throw new CheckpointError(`${p}: index puts "${name}" in ${shard}, which does not hold it`);
        entries.set(name, entry);
      }
      const ck = new Checkpoint(p, files, await attachFp8Scales(p, entries, (e) => files.get(e.file)!.handle, checkpointError), index.metadata ?? {});
      ck.absent = absent;
      return ck;
    } catch (e) {
      await Promise.all([...files.values()].map((f) => f.close()));
      throw e;
    }
  }

  private static async openGguf(p: string): Promise<Checkpoint> {
    const handle = await openFile(p, 'r').catch((e: Error) => {
      throw new CheckpointError(`${p}: cannot open (${e.message})`);
    });
    try {
      const { entries, metadata } = await readGgufContents(p, (await handle.stat()).size, checkpointError);
      return new Checkpoint(p, new Map([[p, { handle, close: () => handle.close() }]]), entries, metadata);
    } catch (e) {
      await handle.close();
      throw e;
    }
  }

  /**
   * This checkpoint with its tensors under other names: `rename(key)` gives the name a loader asks for, null to
   * leave the tensor out, or row ranges each read as a tensor of its own (a fused [gate; up] weight as two: RowPart) (ComfyUI's single files read under the names Kiln's loaders use: comfy-keys.ts). The files
   * move to the returned checkpoint: close that one, not this. Two keys given one name are refused by name.
   */
  renamed(rename: (key: string) => string | null | RowPart[]): Checkpoint {
    const entries = new Map<string, TensorEntry>();
    const from = new Map<string, string>();
    const put = (n: string, k: string, e: TensorEntry) => {
      if (from.has(n)) throw new CheckpointError(`${this.path}: "${from.get(n)}" and "${k}" both stand for "${n}"`);
      from.set(n, k);
      entries.set(n, n === k ? e : { ...e, name: n }); // loaders look an entry up again by its name
    };
    for (const [k, e] of this.entries) {
      const n = rename(k);
      if (n === null) continue;
      if (typeof n === 'string') put(n, k, e);
      else for (const p of n) put(p.name, k, entryRows(e, p.rows[0], p.rows[1], this.path));
    }
    const ck = new Checkpoint(this.path, new Map(this.files), entries, this.metadata);
    this.files.clear();
    return ck;
  }

  has(name: string): boolean {
    return this.entries.has(name);
  }

  keys(): string[] {
    return [...this.entries.keys()];
  }

  /** The entry for `name`; throws naming the key (and near misses), or the shapes when `shape` disagrees. */
  entry(name: string, shape?: readonly number[]): TensorEntry {
    const e = this.entries.get(name);
    if (!e && this.absent.has(name)) {
      throw new CheckpointError(`${this.path}: tensor "${name}" is in ${this.absent.get(name)}, which is not on disk (npm run weights -- pull <profile> --all fetches every shard)`);
    }
    if (!e) {
      const near = nearKeys(name, this.keys());
      throw new CheckpointError(`${this.path}: no tensor "${name}"${near.length ? ` (similar: ${near.join(', ')})` : ''}`);
    }
    if (shape && (shape.length !== e.shape.length || shape.some((n, i) => n !== e.shape[i]))) {
      throw new CheckpointError(`${this.path}: tensor "${name}" is ${e.dtype}${fmtShape(e.shape)}, expected shape ${fmtShape(shape)}`);
    }
    return e;
  }

  /**
   * Streams a tensor's bytes in chunks of at most `chunkBytes` (whole elements): `onChunk(bytes, byteOffset)` must
   * consume the bytes before returning (their buffer is read into again). Two buffers take turns, so the next chunk
   * is read from the file while `onChunk` converts, quantises or uploads this one (a cold file then loads at the
   * slower of the disk and the conversion, not their sum).
   */
  async readChunks(name: string, chunkBytes: number, onChunk: (bytes: Uint8Array, byteOffset: number) => void | Promise<void>, scratch?: Buffer): Promise<void> {
    const e = this.entry(name);
    const handle = this.files.get(e.file)!.handle;
    if (e.scaled) return readScaledChunks(handle, e, chunkBytes, onChunk, checkpointError);
    if (e.quant) return readQuantChunks(handle, e, chunkBytes, onChunk, checkpointError);
    const elem = SAFE_DTYPE_BYTES[e.dtype];
    const step = Math.max(elem, Math.floor(chunkBytes / elem) * elem);
    const size = Math.min(step, Math.max(elem, e.byteLength));
    const bufs = [scratch && scratch.byteLength >= size ? scratch : takeReadBuffer(size)];
    if (e.byteLength > step) bufs.push(takeReadBuffer(size));
    try {
      await this.readInto(e, handle, step, bufs, onChunk);
    } finally {
      for (const b of bufs) if (b !== scratch) giveReadBuffer(b);
    }
  }

  private async readInto(e: TensorEntry, handle: FileHandle, step: number, bufs: Buffer[], onChunk: (bytes: Uint8Array, byteOffset: number) => void | Promise<void>): Promise<void> {
    const name = e.name;
    const read = async (i: number): Promise<Buffer> => {
      const off = i * step;
      const len = Math.min(step, e.byteLength - off);
      const buf = bufs[i % bufs.length]!;
      const { bytesRead } = await handle.read(buf, 0, len, e.start + off);
      if (bytesRead !== len) throw new CheckpointError(`${e.file}: tensor "${name}" truncated at byte ${e.start + off + bytesRead}`);
      return buf.subarray(0, len);
    };
    const chunks = Math.ceil(e.byteLength / step);
    let next = chunks > 0 ? read(0) : null;
    for (let i = 0; i < chunks; i++) {
      const bytes = await next!;
      next = i + 1 < chunks ? read(i + 1) : null; // into the other buffer, while this one is consumed
      try {
        await onChunk(bytes, i * step);
      } catch (err) {
        await next?.catch(() => undefined);
        throw err;
      }
    }
  }

  /** A GGUF quantised tensor's stored blocks, in chunks of whole blocks of at most `chunkBytes` (one reused buffer:
   * consume each before returning), for the GPU's dequant kernel (load.ts). */
  async readBlocks(name: string, chunkBytes: number, onChunk: (bytes: Uint8Array, byteOffset: number) => void | Promise<void>): Promise<void> {
    const e = this.entry(name);
    if (!e.quant) throw new CheckpointError(`${this.path}: tensor "${name}" is ${e.dtype}, not quantised blocks`);
    const handle = this.files.get(e.file)!.handle;
    const bs = GGML_TYPES[e.quant.type].bytes;
    const step = Math.max(bs, Math.floor(chunkBytes / bs) * bs);
    const buf = Buffer.allocUnsafe(Math.min(step, e.quant.byteLength));
    for (let off = 0; off < e.quant.byteLength; off += step) {
      const len = Math.min(step, e.quant.byteLength - off);
      const { bytesRead } = await handle.read(buf, 0, len, e.quant.start + off);
      if (bytesRead !== len) throw new CheckpointError(`${e.file}: tensor "${name}" truncated at byte ${e.quant.start + off + bytesRead}`);
      await onChunk(buf.subarray(0, len), off);
    }
  }

  /**
   * The int8 cache's identity of tensor `name` (int8-cache.ts): its file's real path and name as the place; the
   * file's identity (size and mtime, or a hub blob's hash), the entry's dtype, shape and offsets, and an fp8 scale's
   * or GGUF block's layout as the content.
   */
  async sourceIdentity(name: string): Promise<SourceIdentity | null> {
    const e = this.entry(name);
    const parts: unknown[] = [fileIdentity(e.file), e.dtype, e.shape, e.start, e.byteLength];
    if (e.scaled) {
      const s = e.scaled;
      const scale = createHash('sha256').update(new Uint8Array(s.scale.buffer, s.scale.byteOffset, s.scale.byteLength)).digest('hex');
      parts.push({ fp8: s.dtype, start: s.start, bytes: s.byteLength, scale: s.scaleName, values: scale, row: s.rowLength });
    }
    if (e.quant) parts.push({ gguf: e.quant.type, start: e.quant.start, bytes: e.quant.byteLength });
    return { where: `${realpathSync(e.file)}#${name}`, what: JSON.stringify(parts) };
  }

  /** Whole tensor as float32 (small tensors: tests, CPU-side tables). */
  async readFloat32(name: string): Promise<Float32Array> {
    return readWholeFloat32(this, name);
  }

  async close(): Promise<void> {
    await Promise.all([...this.files.values()].map((f) => f.close()));
    this.files.clear();
  }
}

// Read buffers kept between readChunks calls: a fresh multi-MiB Buffer costs its page faults at first touch (about
// 1.2 ms per MiB measured here, 2026-12-07: a 2 GiB load at 8 MiB chunks allocated 1 GiB of them, about 1.2 s), while
// a reused one is only read into. Sizes of 1 MiB and up (smaller ones are cheap), at most READ_BUFFERS kept.
const READ_BUFFERS = 4;
const readBuffers: Buffer[] = [];

function takeReadBuffer(size: number): Buffer {
  const i = size >= 2 ** 20 ? readBuffers.findIndex((b) => b.byteLength === size) : -1;
  return i >= 0 ? readBuffers.splice(i, 1)[0]! : Buffer.allocUnsafe(size);
}

function giveReadBuffer(b: Buffer): void {
  if (b.byteLength < 2 ** 20) return;
  readBuffers.push(b);
  if (readBuffers.length > READ_BUFFERS) readBuffers.shift();
}


async function readIndex(p: string): Promise<{ weight_map: Record<string, string>; metadata?: Record<string, string> }> {
  let json: { weight_map?: unknown; metadata?: Record<string, string> };
  try {
    const h = await openFile(p, 'r');
    try {
      json = JSON.parse(await h.readFile('utf8'));
    } finally {
      await h.close();
    }
  } catch (e) {
    throw new CheckpointError(`${p}: unreadable index (${(e as Error).message})`);
  }
  const map = json.weight_map;
  if (!map || typeof map !== 'object') throw new CheckpointError(`${p}: index has no weight_map`);
  for (const [k, f] of Object.entries(map)) {
    if (typeof f !== 'string' || basename(f) !== f) throw new CheckpointError(`${p}: weight_map["${k}"] = ${JSON.stringify(f)} is not a file name`);
  }
  return { weight_map: map as Record<string, string>, metadata: json.metadata };
}

function nearKeys(name: string, keys: string[]): string[] {
  const score = (k: string) => {
    let p = 0;
    while (p < k.length && k[p] === name[p]) p++;
    let s = 0;
    while (s < k.length && k[k.length - 1 - s] === name[name.length - 1 - s]) s++;
    return p + s;
  };
  return keys
    .map((k) => [k, score(k)] as const)
    .filter(([, s]) => s >= Math.min(4, name.length / 2))
    .sort((a, b) => b[1] - a[1])
    .slice(0, 3)
    .map(([k]) => k);
}
