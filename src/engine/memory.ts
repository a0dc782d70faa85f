// GPU memory: a size-class buffer pool with accounting. Every tensor's storage comes from here.
// Sampling steps repeat the same sizes, so after the first step every acquire is served from the free lists;
// `frozen` turns "a buffer was created inside a step" into an error the tests can catch.
import { BufferUsage } from './webgpu';

/** Not enough GPU memory for a request (the scheduler should have refused the job with canFit()). */
export class GpuOutOfMemoryError extends Error {
  override readonly name = 'GpuOutOfMemoryError';
}

export interface PooledBuffer {
  readonly buffer: GPUBuffer;
  /** Bytes of the GPU buffer (the size class), >= what was asked for; a multiple of 16. */
  readonly size: number;
}

export interface PoolStats {
  /** Bytes of live GPU buffers (in use + cached). */
  allocatedBytes: number;
  inUseBytes: number;
  cachedBytes: number;
  peakAllocatedBytes: number;
  peakInUseBytes: number;
  /** GPU buffers created since the pool was made (constant during a warmed-up step). */
  buffersCreated: number;
  budgetBytes: number;
}

const MIN_CLASS = 256;

/** Size classes: 4 steps per power of two (at most 25% waste), at least 256 bytes, multiples of 16. */
export function sizeClass(bytes: number): number {
  if (bytes <= MIN_CLASS) return MIN_CLASS;
  const step = 2 ** Math.floor(Math.log2(bytes)) / 4;
  return Math.ceil(bytes / step) * step;
}

export class BufferPool {
  private readonly free = new Map<number, GPUBuffer[]>();
  private readonly live = new Set<GPUBuffer>();
  private stat: PoolStats;
  /** While true, a request that the free lists cannot serve throws instead of creating a buffer. */
  frozen = false;
  /** Called after trim() destroys buffers (the engine drops the bind groups that held them). */
  onTrim: (() => void) | null = null;

  /**
   * @param budgetBytes what this process may hold on the GPU (WebGPU cannot query free memory: the config
   *   says it, e.g. 130 GiB on an H200); canFit() and new allocations are checked against it.
   * @param maxBindingBytes the largest single buffer (every tensor is bound whole; see GpuDevice.maxBindingBytes).
   */
  constructor(
    private readonly device: GPUDevice,
    budgetBytes: number,
    readonly maxBindingBytes: number,
  ) {
    this.stat = { allocatedBytes: 0, inUseBytes: 0, cachedBytes: 0, peakAllocatedBytes: 0, peakInUseBytes: 0, buffersCreated: 0, budgetBytes };
  }

  /** True if `bytes` more can be held alongside what is in use now (cached buffers can be trimmed). */
  canFit(bytes: number): boolean {
    return this.stat.inUseBytes + bytes <= this.stat.budgetBytes;
  }

  stats(): PoolStats {
    return { ...this.stat };
  }

  /** Starts the peaks again from what is held now (a plan measures each stage's own peak). */
  resetPeaks(): void {
    this.stat.peakInUseBytes = this.stat.inUseBytes;
    this.stat.peakAllocatedBytes = this.stat.allocatedBytes;
  }

  acquire(bytes: number, label = 'tensor'): PooledBuffer {
    if (!(bytes > 0)) throw new RangeError(`pool: cannot allocate ${bytes} bytes for ${label}`);
    if (bytes > this.maxBindingBytes) {
      throw new GpuOutOfMemoryError(
        `pool: ${label} needs ${fmtBytes(bytes)} in one binding, over the ${fmtBytes(this.maxBindingBytes)} this adapter allows; split it`,
      );
    }
    let size = Math.min(sizeClass(bytes), Math.floor(this.maxBindingBytes / 16) * 16);
    size = Math.max(size, Math.ceil(bytes / 16) * 16);
    const cached = this.free.get(size)?.pop();
    if (cached) {
      this.stat.cachedBytes -= size;
      return this.take(cached, size);
    }
    if (this.frozen) throw new Error(`pool: ${label} would create a new ${fmtBytes(size)} buffer while the pool is frozen (inside a step)`);
    if (this.stat.allocatedBytes + size > this.stat.budgetBytes) this.trim();
    if (this.stat.allocatedBytes + size > this.stat.budgetBytes) {
      throw new GpuOutOfMemoryError(
        `pool: ${label} needs ${fmtBytes(size)}; ${fmtBytes(this.stat.inUseBytes)} in use of a ${fmtBytes(this.stat.budgetBytes)} budget`,
      );
    }
    const buffer = this.device.createBuffer({
      size,
      usage: BufferUsage.STORAGE | BufferUsage.COPY_SRC | BufferUsage.COPY_DST,
      label,
    });
    this.live.add(buffer);
    this.stat.buffersCreated++;
    this.stat.allocatedBytes += size;
    this.stat.peakAllocatedBytes = Math.max(this.stat.peakAllocatedBytes, this.stat.allocatedBytes);
    return this.take(buffer, size);
  }

  /** Returns a buffer to its free list. Safe with work still queued: later uses are ordered after it on the queue. */
  release(b: PooledBuffer): void {
    if (!this.live.has(b.buffer)) return; // pool destroyed or trimmed already
    this.stat.inUseBytes -= b.size;
    this.stat.cachedBytes += b.size;
    let list = this.free.get(b.size);
    if (!list) this.free.set(b.size, (list = []));
    list.push(b.buffer);
  }

  /** Destroys every cached (free) buffer. */
  trim(): void {
    for (const [size, list] of this.free) {
      for (const buf of list) {
        buf.destroy();
        this.live.delete(buf);
        this.stat.allocatedBytes -= size;
        this.stat.cachedBytes -= size;
      }
    }
    this.free.clear();
    this.onTrim?.();
  }

  destroy(): void {
    for (const buf of this.live) buf.destroy();
    this.live.clear();
    this.free.clear();
    this.stat.allocatedBytes = this.stat.inUseBytes = this.stat.cachedBytes = 0;
  }

  private take(buffer: GPUBuffer, size: number): PooledBuffer {
    this.stat.inUseBytes += size;
    this.stat.peakInUseBytes = Math.max(this.stat.peakInUseBytes, this.stat.inUseBytes);
    return { buffer, size };
  }
}

export function fmtBytes(n: number): string {
  if (n >= 2 ** 30) return `${(n / 2 ** 30).toFixed(2)} GiB`;
  if (n >= 2 ** 20) return `${(n / 2 ** 20).toFixed(1)} MiB`;
  if (n >= 2 ** 10) return `${(n / 2 ** 10).toFixed(1)} KiB`;
  return `${n} B`;
}
