// Tensors: a view (shape, strides, element offset, dtype) over a Storage (one pooled GPU buffer).
// Views (transpose, permute, slice, expand, reshape of contiguous data) share the storage and copy nothing;
// kernels receive strides and the element offset as parameters and bind the whole storage buffer, so a view
// never needs an aligned binding offset. Strides are in elements and never negative.
import { DTYPE_BYTES, type DType } from './dtype';
import type { PooledBuffer } from './memory';

/** The scope or owner that frees a storage (scope.ts); a freed storage leaves it. */
export interface StorageOwner {
  disown(s: Storage): void;
}

/** One GPU allocation shared by a tensor and its views. Freed once: by hand (free(); a second free does nothing) or
 * by the scope that owns it (scope.ts). Its bytes may wait in host memory
 * for a while (host-held.ts: releaseToHost / restoreFromHost); the tensor and its views stay valid, but using them
 * before the bytes are back is an error. */
export class Storage {
  private freedBy: string | null = null;
  private current: PooledBuffer | null;
  /** The scope that frees this storage at its end, if any (scope.ts). */
  owner: StorageOwner | null = null;

  constructor(
    pooled: PooledBuffer,
    /** Bytes the owner asked for (the pooled buffer may be larger). */
    readonly byteLength: number,
    private readonly onFree: (p: PooledBuffer) => void,
    /** What the tensor was made as (Engine.empty's label, `f16[2,3]` by default), for errors. */
    readonly label = `${byteLength} bytes`,
  ) {
    this.current = pooled;
  }

  get pooled(): PooledBuffer {
    if (!this.current) throw new Error(`tensor storage (${this.byteLength} bytes) used while its bytes are held on the host`);
    return this.current;
  }

  get buffer(): GPUBuffer {
    if (this.freedBy) throw new Error(`tensor ${this.label} used after free (freed by ${this.freedBy})`);
    return this.pooled.buffer;
  }

  get freed(): boolean {
    return this.freedBy !== null;
  }

  /** True while the bytes are in host memory (between detach() and attach()). */
  get onHost(): boolean {
    return this.current === null && this.freedBy === null;
  }

  /** Gives up the GPU buffer (the caller returns it to the pool, its bytes kept elsewhere). */
  detach(): PooledBuffer {
    const p = this.pooled;
    if (this.freedBy) throw new Error(`tensor storage detached after free (${this.freedBy})`);
    this.current = null;
    return p;
  }

  /** Takes a GPU buffer again (the caller writes the bytes back). */
  attach(p: PooledBuffer): void {
    if (this.current || this.freedBy) throw new Error('tensor storage attached while it holds a buffer or after free');
    this.current = p;
  }

  free(who: string): void {
    if (this.freedBy) return;
    this.freedBy = who;
    this.owner?.disown(this);
    // bytes on the host: the buffer went back to the pool when they left
    if (this.current) this.onFree(this.current);
    this.current = null;
  }
}

export function contiguousStrides(shape: readonly number[]): number[] {
  const strides = new Array<number>(shape.length);
  let s = 1;
  for (let d = shape.length - 1; d >= 0; d--) {
    strides[d] = s;
    s *= shape[d]!;
  }
  return strides;
}

export function numelOf(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

export function fmtShape(shape: readonly number[]): string {
  return `[${shape.join(',')}]`;
}

export class Tensor {
  readonly shape: readonly number[];
  readonly strides: readonly number[];

  constructor(
    readonly storage: Storage,
    shape: readonly number[],
    readonly dtype: DType,
    strides: readonly number[] = contiguousStrides(shape),
    /** Offset of element [0,0,..] from the start of the storage, in elements. */
    readonly offset = 0,
  ) {
    for (const n of shape) if (!Number.isInteger(n) || n < 0) throw new RangeError(`tensor: bad shape ${fmtShape(shape)}`);
    if (strides.length !== shape.length) throw new RangeError(`tensor: strides ${fmtShape(strides)} vs shape ${fmtShape(shape)}`);
    this.shape = Object.freeze([...shape]);
    this.strides = Object.freeze([...strides]);
  }

  get rank(): number {
    return this.shape.length;
  }

  get numel(): number {
    return numelOf(this.shape);
  }

  get bytesPerElement(): number {
    return DTYPE_BYTES[this.dtype];
  }

  /** Row-major with no gaps (size-1 dims may have any stride). */
  get isContiguous(): boolean {
    let s = 1;
    for (let d = this.rank - 1; d >= 0; d--) {
      if (this.shape[d] === 1) continue;
      if (this.strides[d] !== s) return false;
      s *= this.shape[d]!;
    }
    return true;
  }

  /** The `f16[2,3]` form used in error messages. */
  toString(): string {
    return `${this.dtype}${fmtShape(this.shape)}`;
  }

  free(): void {
    this.storage.free(this.toString());
  }

  // ---- views: no copies, same storage ----

  private view(shape: readonly number[], strides: readonly number[], offset = this.offset): Tensor {
    return new Tensor(this.storage, shape, this.dtype, strides, offset);
  }

  private dim(d: number, op: string): number {
    const r = d < 0 ? d + this.rank : d;
    if (r < 0 || r >= this.rank) throw new RangeError(`${op}: dim ${d} out of range for ${this}`);
    return r;
  }

  /** Reorders dims: out.shape[i] = this.shape[order[i]]. */
  permute(order: readonly number[]): Tensor {
    const ord = order.map((d) => this.dim(d, 'permute'));
    if (ord.length !== this.rank || new Set(ord).size !== this.rank) throw new RangeError(`permute: order ${fmtShape(order)} for ${this}`);
    return this.view(
      ord.map((d) => this.shape[d]!),
      ord.map((d) => this.strides[d]!),
    );
  }

  transpose(d0 = -2, d1 = -1): Tensor {
    const order = [...Array(this.rank).keys()];
    const a = this.dim(d0, 'transpose');
    const b = this.dim(d1, 'transpose');
    [order[a], order[b]] = [order[b]!, order[a]!];
    return this.permute(order);
  }

  /** Elements start..end-1 (step >= 1) along dim. */
  slice(dim: number, start: number, end: number, step = 1): Tensor {
    const d = this.dim(dim, 'slice');
    const n = this.shape[d]!;
    if (!(0 <= start && start <= end && end <= n && step >= 1 && Number.isInteger(step))) {
      throw new RangeError(`slice: [${start}:${end}:${step}] on dim ${d} of ${this}`);
    }
    const shape = [...this.shape];
    const strides = [...this.strides];
    shape[d] = Math.ceil((end - start) / step);
    strides[d] = this.strides[d]! * step;
    return this.view(shape, strides, this.offset + start * this.strides[d]!);
  }

  /** Broadcasts size-1 dims (and new leading dims) to `shape` with stride 0. */
  expand(shape: readonly number[]): Tensor {
    const lead = shape.length - this.rank;
    if (lead < 0) throw new RangeError(`expand: ${this} to ${fmtShape(shape)}`);
    const strides = shape.map((n, i) => {
      if (i < lead) return 0;
      const own = this.shape[i - lead]!;
      if (own === n) return this.strides[i - lead]!;
      if (own === 1) return 0;
      throw new RangeError(`expand: ${this} to ${fmtShape(shape)}`);
    });
    return this.view(shape, strides);
  }

  /** New shape over the same elements; the tensor must be contiguous (call ops' contiguous() first otherwise). */
  reshape(shape: readonly number[]): Tensor {
    const known = shape.filter((n) => n !== -1);
    const resolved = shape.map((n) => (n === -1 ? this.numel / numelOf(known) : n));
    if (numelOf(resolved) !== this.numel || !resolved.every(Number.isInteger)) {
      throw new RangeError(`reshape: ${this} to ${fmtShape(shape)}`);
    }
    if (!this.isContiguous) throw new Error(`reshape: ${this} is a non-contiguous view; make it contiguous first`);
    return this.view(resolved, contiguousStrides(resolved));
  }

  unsqueeze(dim: number): Tensor {
    const d = dim < 0 ? dim + this.rank + 1 : dim;
    const shape = [...this.shape];
    const strides = [...this.strides];
    shape.splice(d, 0, 1);
    strides.splice(d, 0, (this.strides[d] ?? 1) * (this.shape[d] ?? 1));
    return this.view(shape, strides);
  }
}

/** Shape of broadcasting a with b (numpy rules), or null if they do not broadcast. */
export function broadcastShapes(a: readonly number[], b: readonly number[]): number[] | null {
  const rank = Math.max(a.length, b.length);
  const out: number[] = [];
  for (let i = 0; i < rank; i++) {
    const x = a[a.length - rank + i] ?? 1;
    const y = b[b.length - rank + i] ?? 1;
    if (x !== y && x !== 1 && y !== 1) return null;
    out.push(x === 1 ? y : x);
  }
  return out;
}
