// An embedding table [rows, dim] that is only ever read a few rows at a time (token embeddings). Kept on the GPU
// when it fits one binding (a gather kernel, as before), else on the host: the table stays in the checkpoint file
// and each lookup reads just the asked rows by file offset (synchronously: a few KiB from the page cache), converts
// them from the file's dtype (F32/F16/BF16) to the compute dtype on the CPU and uploads them into a pooled tensor.
// So a table bigger than maxBindingBytes (Qwen3-TTS's text_embedding in f16 on lavapipe's 128 MiB, MiniMax H3's
// 32B text encoder table at 3.1 GB in f32) loads anywhere, and the whole file is never in JS memory.
import { closeSync, openSync, readSync } from 'node:fs';
import { DTYPE_BYTES, encode, f32ToF16Bits, type DType } from './dtype';
import type { Engine } from './engine';
import { loadTensor } from './load';
import { gather, uploadIds } from './ops/layout';
import { Checkpoint, CheckpointError, SAFE_DTYPE_BYTES, decodeSafe, type SafeDType, type TensorEntry } from './safetensors';
import { fmtShape, type Tensor } from './tensor';

/** Where the rows live: 'auto' = GPU when the table fits one binding, else host. */
export type RowTablePlacement = 'auto' | 'gpu' | 'host';

export interface RowTableOptions {
  /** Compute dtype of the rows handed out. Default: F32 -> f32, F16 -> f16, BF16 -> f32 (as loadTensor). */
  dtype?: 'f32' | 'f16';
  /** Expected [rows, dim]: a mismatch is a CheckpointError naming both shapes. */
  shape?: readonly [number, number];
  /** Default 'auto'. 'host' forces the file-backed path (tests, or to spare GPU memory). */
  placement?: RowTablePlacement;
}

const HOST_DTYPES: Partial<Record<SafeDType, 'f32' | 'f16'>> = { F32: 'f32', F16: 'f16', BF16: 'f32' };

export class RowTable {
  /** Host path: reused scratch for the raw file rows and for the converted rows (grown, never shrunk). */
  private raw = Buffer.alloc(0);
  private staged = new Uint8Array(0);

  private constructor(
    private readonly e: Engine,
    readonly name: string,
    readonly rows: number,
    readonly dim: number,
    readonly dtype: 'f32' | 'f16',
    /** GPU path: the whole table. */
    private gpuTable: Tensor | null,
    /** Host path: the checkpoint entry (file, byte offset, dtype) and an open descriptor on its file. */
    private readonly entry: TensorEntry | null,
    private fd: number | null,
  ) {}

  static async load(e: Engine, ckpt: Checkpoint, name: string, o: RowTableOptions = {}): Promise<RowTable> {
    const entry = ckpt.entry(name, o.shape);
    if (entry.shape.length !== 2) throw new CheckpointError(`${ckpt.path}: tensor "${name}" is ${entry.dtype}${fmtShape(entry.shape)}; a row table is [rows, dim]`);
    const [rows, dim] = entry.shape as [number, number];
    const hostDType = HOST_DTYPES[entry.dtype];
    if (!hostDType) throw new CheckpointError(`${ckpt.path}: tensor "${name}" is ${entry.dtype}; a row table reads F32, F16 or BF16`);
    const dtype = o.dtype ?? hostDType;
    const placement = o.placement ?? 'auto';
    const onHost = placement === 'host' || (placement === 'auto' && rows * dim * DTYPE_BYTES[dtype] > e.gpu.maxBindingBytes);
    if (!onHost) return new RowTable(e, name, rows, dim, dtype, await loadTensor(e, ckpt, name, { dtype, shape: o.shape }), null, null);
    let fd: number;
    try {
      fd = openSync(entry.file, 'r');
    } catch (err) {
      throw new CheckpointError(`${entry.file}: cannot open for "${name}" (${(err as Error).message})`);
    }
    return new RowTable(e, name, rows, dim, dtype, null, entry, fd);
  }

  /** 'gpu' or 'host': where load() put the table. */
  get placement(): 'gpu' | 'host' {
    return this.entry ? 'host' : 'gpu';
  }

  /** Rows `ids` -> a new contiguous GPU tensor [...shape, dim] in `dtype` (default shape [ids.length]); the caller frees it. */
  lookup(ids: ArrayLike<number>, shape: readonly number[] = [ids.length]): Tensor {
    if (!this.gpuTable && this.fd === null) throw new Error(`RowTable ${this.name}: used after free()`);
    const n = shape.reduce((a, b) => a * b, 1);
    if (n !== ids.length) throw new RangeError(`RowTable ${this.name}: ${ids.length} ids for shape ${fmtShape(shape)}`);
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i]!;
      if (!Number.isInteger(id) || id < 0 || id >= this.rows) throw new RangeError(`RowTable ${this.name}: id ${id} at ${i} outside 0..${this.rows - 1}`);
    }
    if (this.gpuTable) {
      const t = uploadIds(this.e, ids, shape);
      const x = gather(this.e, this.gpuTable, t);
      t.free();
      return x;
    }
    const out = this.e.empty([...shape, this.dim], this.dtype, `${this.name} rows`);
    try {
      if (n > 0) this.e.writeBytes(out, 0, this.readRows(ids));
    } catch (err) {
      out.free();
      throw err;
    }
    return out;
  }

  /** Host path: the rows in compute-dtype bytes, in the reused staging buffer (valid until the next call). */
  private readRows(ids: ArrayLike<number>): Uint8Array {
    const entry = this.entry!;
    const srcRow = this.dim * SAFE_DTYPE_BYTES[entry.dtype];
    const dstRow = this.dim * DTYPE_BYTES[this.dtype];
    if (this.raw.byteLength < srcRow) this.raw = Buffer.alloc(srcRow);
    if (this.staged.byteLength < ids.length * dstRow) this.staged = new Uint8Array(ids.length * dstRow);
    const same = HOST_DTYPES[entry.dtype] === this.dtype && entry.dtype !== 'BF16';
    for (let i = 0; i < ids.length; i++) {
      const pos = entry.start + ids[i]! * srcRow;
      const got = readSync(this.fd!, this.raw, 0, srcRow, pos);
      if (got !== srcRow) throw new CheckpointError(`${entry.file}: tensor "${this.name}" truncated at byte ${pos + got}`);
      const bytes = this.raw.subarray(0, srcRow);
      if (same) {
        this.staged.set(bytes, i * dstRow);
        continue;
      }
      const values = decodeSafe(bytes, entry.dtype);
      if (this.dtype === 'f16') checkF16Range(values, entry.file, this.name, ids[i]!);
      this.staged.set(encode(values, this.dtype as DType), i * dstRow);
    }
    return this.staged.subarray(0, ids.length * dstRow);
  }

  free(): void {
    this.gpuTable?.free();
    this.gpuTable = null;
    if (this.fd !== null) closeSync(this.fd);
    this.fd = null;
  }
}

function checkF16Range(values: Float32Array, path: string, name: string, row: number): void {
  for (let i = 0; i < values.length; i++) {
    const v = values[i]!;
    if (Number.isFinite(v) && (f32ToF16Bits(v) & 0x7fff) === 0x7c00) {
      throw new CheckpointError(`${path}: tensor "${name}" row ${row} holds ${v}, beyond f16's range (65504); load it as f32`);
    }
  }
}
