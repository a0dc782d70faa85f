// A checkpoint whose tensors exist when asked for: stands in for a Checkpoint wherever a loader takes one. The demo
// writers (src/models/*/demo.ts) run each model's loaders against one (zeros) to record every key and shape they read,
// then write exactly those with random-weights.ts values, in the published checkpoint format; the benchmarks load
// random weights at the real sizes straight from memory (WeightSynth.fill). Nothing is read from disk.
import { Checkpoint, CheckpointError, readWholeFloat32, SAFE_DTYPE_BYTES, type SafeDType, type TensorEntry } from '../../engine/safetensors';
import { numelOf } from '../../engine/tensor';

export interface SyntheticCheckpointOptions {
  /** Shown in error messages, like a file path. */
  label: string;
  /** Stored dtype of every tensor (what loadTensor converts from). */
  dtype: SafeDType;
  /** Writes values for elements [first, first + n) of `entry` into `out` (n = out.byteLength / element size). */
  fill(entry: TensorEntry, out: Uint8Array, first: number): void;
  /** Whether an optional tensor exists (a loader asking has()). Default: everything exists. */
  has?(name: string): boolean;
  /** Shape of a tensor a loader asks for without giving one. */
  shapeOf?(name: string): number[] | undefined;
}

/** SyntheticCheckpointOptions.fill for recording keys: every value 0. */
export const zeroFill = (_: TensorEntry, out: Uint8Array): void => void out.fill(0);

/**
 * Stands in for a Checkpoint (has, entry, readChunks, readFloat32): every tensor a loader asks for is created with
 * the shape it expects, and its bytes come from `fill`. `entries` then lists exactly what the loaders read.
 */
export class SyntheticCheckpoint {
  readonly entries = new Map<string, TensorEntry>();
  readonly metadata: Record<string, string> = {};

  constructor(private readonly o: SyntheticCheckpointOptions) {}

  get path(): string {
    return this.o.label;
  }

  /** This object where a loader takes a Checkpoint (it has every member the loaders use). */
  get checkpoint(): Checkpoint {
    return this as unknown as Checkpoint;
  }

  has(name: string): boolean {
    return this.entries.has(name) || (this.o.has?.(name) ?? true);
  }

  keys(): string[] {
    return [...this.entries.keys()];
  }

  /** Every key asked for so far, with its shape: what the loaders read. */
  shapes(): Map<string, number[]> {
    return new Map([...this.entries].map(([k, v]) => [k, v.shape]));
  }

  entry(name: string, shape?: readonly number[]): TensorEntry {
    const known = this.entries.get(name);
    if (known) {
      if (shape && (shape.length !== known.shape.length || shape.some((n, i) => n !== known.shape[i]))) {
        throw new CheckpointError(`${this.path}: tensor "${name}" asked for as [${shape}] after [${known.shape}]`);
      }
      return known;
    }
    if (!this.has(name)) throw new CheckpointError(`${this.path}: no tensor "${name}"`);
    const s = shape ? [...shape] : this.o.shapeOf?.(name);
    if (!s) throw new CheckpointError(`${this.path}: tensor "${name}" asked for without a shape, and shapeOf does not know it`);
    const e: TensorEntry = { name, dtype: this.o.dtype, shape: s, file: this.path, start: 0, byteLength: numelOf(s) * SAFE_DTYPE_BYTES[this.o.dtype] };
    this.entries.set(name, e);
    return e;
  }

  async readChunks(name: string, chunkBytes: number, onChunk: (bytes: Uint8Array, byteOffset: number) => void | Promise<void>): Promise<void> {
    const e = this.entry(name);
    const elem = SAFE_DTYPE_BYTES[e.dtype];
    const step = Math.max(elem, Math.floor(chunkBytes / elem) * elem);
    const buf = new Uint8Array(Math.min(step, Math.max(elem, e.byteLength)));
    for (let off = 0; off < e.byteLength; off += step) {
      const chunk = buf.subarray(0, Math.min(step, e.byteLength - off));
      this.o.fill(e, chunk, off / elem);
      await onChunk(chunk, off);
    }
  }

  async readFloat32(name: string): Promise<Float32Array> {
    return readWholeFloat32(this, name);
  }

  async close(): Promise<void> {}
}
