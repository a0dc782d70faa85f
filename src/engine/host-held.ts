// Weights that wait in host memory while something else needs the GPU (a video job's text encoder beside its DiT:
// models/minimax_h3/pipeline.ts): releaseToHost() reads each distinct storage back into host memory and returns its
// buffer to the pool; restore() takes buffers of the same size class again and writes the bytes back. The Tensor
// objects (and their views) stay the same throughout, so the model holding them needs no reload; using one while its
// bytes are on the host throws (tensor.ts Storage.pooled). On the shape-only engine nothing is read or written, the
// pool counts the same bytes leaving and coming back.
import type { Engine } from './engine';
import { UPLOAD_CHUNK_BYTES } from './engine';
import type { Storage, Tensor } from './tensor';
import { BufferUsage, MapMode } from './webgpu';

/** Bytes read back before one wait (staging buffers alive at once). */
const READBACK_BATCH_BYTES = 256 * 2 ** 20;

export class HostHeld {
  private on = true;
  /** Bytes written to the GPU by restore() calls so far. */
  uploadedBytes = 0;

  private constructor(
    private readonly e: Engine,
    private held: { storage: Storage; bytes: Uint8Array | null }[],
    /** Bytes the storages asked for (what goes back to the GPU on restore). */
    readonly bytes: number,
    /** Pool bytes released (size classes). */
    readonly gpuBytes: number,
    /** restore() keeps the host copy, so evict() can give the buffers back again without a readback (weights that
     * never change: a DiT block streamed every forward). */
    private readonly keep: boolean,
  ) {}

  /** @internal releaseToHost's result. */
  static of(e: Engine, held: { storage: Storage; bytes: Uint8Array | null }[], bytes: number, gpuBytes: number, keep: boolean): HostHeld {
    return new HostHeld(e, held, bytes, gpuBytes, keep);
  }

  /** True while the bytes are on the host (until restore(), again after evict()). */
  get onHost(): boolean {
    return this.on;
  }

  /** Uploads every storage again into a pool buffer of its own size (class); the host copies are dropped unless kept. */
  restore(): void {
    if (!this.on) return;
    const e = this.e;
    e.recorder.flush(); // the writes land after everything recorded before them
    for (const h of this.held) {
      const p = e.pool.acquire(Math.max(16, h.storage.byteLength), 'host-held weights');
      h.storage.attach(p);
      this.uploadedBytes += h.storage.byteLength;
      if (!h.bytes) continue; // shape-only
      for (let off = 0; off < h.bytes.byteLength; off += UPLOAD_CHUNK_BYTES) {
        const chunk = h.bytes.subarray(off, Math.min(off + UPLOAD_CHUNK_BYTES, h.bytes.byteLength));
        e.device.queue.writeBuffer(p.buffer, off, chunk.buffer, chunk.byteOffset, chunk.byteLength);
      }
    }
    this.on = false;
    if (!this.keep) this.held = [];
  }

  /** Gives the buffers back to the pool again, the kept host copy standing for them (no readback). Safe with work
   * that reads them still recorded: the pool orders later uses after it. */
  evict(): void {
    if (this.on) return;
    if (!this.keep) throw new Error('HostHeld.evict: the host copy was not kept (releaseToHost(..., { keep: true }))');
    for (const h of this.held) this.e.pool.release(h.storage.detach());
    this.on = true;
  }
}

/**
 * Moves the bytes of `tensors` (their distinct storages, each whole) to host memory and gives their GPU buffers back
 * to the pool. Waits for the GPU (the readback). Throws on a storage already freed or already on the host. `keep`:
 * restore() keeps the host copy for evict().
 */
export async function releaseToHost(e: Engine, tensors: Iterable<Tensor>, o: { keep?: boolean } = {}): Promise<HostHeld> {
  const storages = [...new Set([...tensors].map((t) => t.storage))];
  for (const s of storages) if (s.freed || s.onHost) throw new Error(`releaseToHost: a storage of ${s.byteLength} bytes is ${s.freed ? 'freed' : 'already on the host'}`);
  const held: { storage: Storage; bytes: Uint8Array | null }[] = storages.map((storage) => ({ storage, bytes: null }));
  if (!e.shapeOnly) {
    // batches of staging copies, one wait each; a 4-byte-rounded copy fits the pooled buffer (16-byte multiples)
    let batch: { i: number; staging: GPUBuffer }[] = [];
    let batchBytes = 0;
    const drain = async () => {
      await e.sync();
      for (const { i, staging } of batch) {
        try {
          await staging.mapAsync(MapMode.READ);
          const h = held[i]!;
          h.bytes = new Uint8Array(staging.getMappedRange().slice(0, h.storage.byteLength));
        } finally {
          staging.destroy();
        }
      }
      batch = [];
      batchBytes = 0;
    };
    for (const [i, h] of held.entries()) {
      const size = Math.max(4, Math.ceil(h.storage.byteLength / 4) * 4);
      const staging = e.device.createBuffer({ size, usage: BufferUsage.MAP_READ | BufferUsage.COPY_DST, label: 'host-held readback' });
      batch.push({ i, staging });
      e.recorder.copy(h.storage.buffer, 0, staging, 0, size);
      batchBytes += size;
      if (batchBytes >= READBACK_BATCH_BYTES) await drain();
    }
    if (batch.length) await drain();
  }
  let bytes = 0;
  let gpuBytes = 0;
  for (const h of held) {
    const p = h.storage.detach();
    bytes += h.storage.byteLength;
    gpuBytes += p.size;
    e.pool.release(p);
  }
  return HostHeld.of(e, held, bytes, gpuBytes, !!o.keep);
}
