// GPU time per kernel from timestamp queries, for benches and the GPU run (docs/performance.md): which kernels a
// model step spends its time in, and so which one to make faster. Off unless asked (Engine option `profile`, or
// KILN_PROFILE=1): profiling gives each dispatch a compute pass of its own, whose begin and end timestamps bound it.
//
// Queries live in one set of 2 x CAPACITY slots; the recorder resolves them into a readback buffer as part of each
// submit (so a set is reused in queue order) and submits early when the set is full. Each readback is mapped
// after its submit; report() waits for them all and sums per kernel name and grid (the recorder names each
// dispatch `<kernel> [x,y,z]`, so a GEMM's shapes show apart).
import { BufferUsage, MapMode } from './webgpu';

export interface KernelTime {
  kernel: string;
  calls: number;
  /** GPU time summed over the calls, in milliseconds. */
  ms: number;
}

const CAPACITY = 1024; // dispatches per query set (2 timestamps each)

export class Profiler {
  private readonly set: GPUQuerySet;
  private readonly resolveBuf: GPUBuffer;
  private names: string[] = [];
  private readonly pending: Promise<void>[] = [];
  private readonly totals = new Map<string, { calls: number; ns: number }>();

  constructor(private readonly device: GPUDevice) {
    this.set = device.createQuerySet({ type: 'timestamp', count: 2 * CAPACITY, label: 'kiln profile' });
    this.resolveBuf = device.createBuffer({ size: 16 * CAPACITY, usage: BufferUsage.QUERY_RESOLVE | BufferUsage.COPY_SRC, label: 'kiln profile resolve' });
  }

  get full(): boolean {
    return this.names.length >= CAPACITY;
  }

  /** The timestamp writes for the next dispatch's pass (the recorder flushes first when full). */
  next(kernel: string): GPUComputePassTimestampWrites {
    const i = this.names.length;
    if (i >= CAPACITY) throw new Error('profiler: query set full (the recorder must flush first)');
    this.names.push(kernel);
    return { querySet: this.set, beginningOfPassWriteIndex: 2 * i, endOfPassWriteIndex: 2 * i + 1 };
  }

  /** Records the resolve of this batch's timestamps into `encoder`; returns what to do after its submit. */
  resolve(encoder: GPUCommandEncoder): (() => void) | null {
    const n = this.names.length;
    if (n === 0) return null;
    const names = this.names;
    this.names = [];
    const read = this.device.createBuffer({ size: 16 * n, usage: BufferUsage.MAP_READ | BufferUsage.COPY_DST, label: 'kiln profile read' });
    encoder.resolveQuerySet(this.set, 0, 2 * n, this.resolveBuf, 0);
    encoder.copyBufferToBuffer(this.resolveBuf, 0, read, 0, 16 * n);
    return () => {
      this.pending.push(read.mapAsync(MapMode.READ).then(() => {
        const t = new BigUint64Array(read.getMappedRange());
        names.forEach((name, i) => {
          // a pass the implementation could not time reads as 0 or end < begin: counted, adds no time
          const ns = t[2 * i + 1]! > t[2 * i]! ? Number(t[2 * i + 1]! - t[2 * i]!) : 0;
          const e = this.totals.get(name) ?? { calls: 0, ns: 0 };
          e.calls++;
          e.ns += ns;
          this.totals.set(name, e);
        });
        read.unmap();
        read.destroy();
      }));
    };
  }

  /** Per kernel, most GPU time first, since the engine was made or the last reset(); call after a sync. */
  async report(): Promise<KernelTime[]> {
    await Promise.all(this.pending.splice(0));
    return [...this.totals].map(([kernel, { calls, ns }]) => ({ kernel, calls, ms: ns / 1e6 })).sort((a, b) => b.ms - a.ms);
  }

  async reset(): Promise<void> {
    await Promise.all(this.pending.splice(0));
    this.totals.clear();
  }

  destroy(): void {
    this.set.destroy();
    this.resolveBuf.destroy();
  }
}

/** A report as aligned text lines: the top `top` kernels by time, with their share of the total. */
export function formatProfile(rows: readonly KernelTime[], top = 15): string[] {
  const total = rows.reduce((s, r) => s + r.ms, 0);
  const lines = rows.slice(0, top).map((r) =>
    `${r.ms.toFixed(3).padStart(11)} ms ${((100 * r.ms) / (total || 1)).toFixed(1).padStart(5)} % ${String(r.calls).padStart(6)} calls  ${r.kernel}`);
  if (rows.length > top) lines.push(`${' '.repeat(15)}(${rows.length - top} more kernels, ${rows.slice(top).reduce((s, r) => s + r.ms, 0).toFixed(3)} ms)`);
  lines.push(`${total.toFixed(3).padStart(11)} ms total GPU time in ${rows.reduce((s, r) => s + r.calls, 0)} dispatches`);
  return lines;
}
