// Load-time int8 quantisation of big checkpoint tensors on several CPU threads. The int8 profiles quantise every
// linear weight at load (the MiniMax H3 DiT: ~32 G weights); on one thread that was ~66 M weights/s, i.e. minutes,
// and the first H200 run (2026-11-28) could not load 2 blocks inside 70 s. Here the tensor's raw bytes go into
// shared memory as read, and a pool of worker threads (quantize-worker.ts) decodes and quantises blocks of rows
// with the same loop as quantizeInt8PerChannel, so the bytes are identical to the one-thread result.
//
// Threads: KILN_LOAD_THREADS, default the machine's available parallelism, at most 16; 1 (or a tensor under
// PARALLEL_MIN_ELEMENTS, or a dtype other than F32/F16/BF16) takes the one-thread path in this thread.
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { cachedInt8 } from './int8-cache';
import { quantizeInt8PerChannel, type QuantizedInt8 } from './quantize';
import type { QuantizeReply, QuantizeTask } from './quantize-worker';
import { readWholeFloat32, SAFE_DTYPE_BYTES, type ChunkSource } from './safetensors';
import { engineSettings } from './settings';
import { numelOf } from './tensor';

/** Below this many weights a tensor is quantised in this thread: a worker round trip would cost more. */
export const PARALLEL_MIN_ELEMENTS = 1 << 22;

/** KILN_LOAD_THREADS (settings.ts), read at each call: the pool is sized when a big tensor is first quantised. */
export function loadThreads(): number {
  return engineSettings().loadThreads;
}

interface Slot {
  worker: Worker;
  busy: number;
}

class QuantizePool {
  private readonly slots: Slot[] = [];
  private readonly pending = new Map<number, { resolve: () => void; reject: (e: Error) => void; slot: Slot }>();
  private nextId = 0;

  constructor(size: number) {
    for (let i = 0; i < size; i++) {
      const worker = new Worker(join(__dirname, 'quantize-worker.js'));
      worker.unref(); // an idle pool never keeps the process alive; a busy slot is ref'd (run)
      const slot: Slot = { worker, busy: 0 };
      worker.on('message', (m: QuantizeReply) => this.settle(m.id, m.error ? new RangeError(m.error) : null));
      worker.on('error', (err) => this.failSlot(slot, err));
      worker.on('exit', (code) => this.failSlot(slot, new Error(`exited with code ${code}`))); // never leave a load waiting
      this.slots.push(slot);
    }
  }

  get size(): number {
    return this.slots.length;
  }

  run(task: Omit<QuantizeTask, 'id'>, slotIndex: number): Promise<void> {
    if (this.slots.length === 0) return Promise.reject(new Error('quantize worker pool: every worker has exited'));
    const slot = this.slots[slotIndex % this.slots.length]!;
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject, slot });
      if (slot.busy++ === 0) slot.worker.ref();
      slot.worker.postMessage({ ...task, id });
    });
  }

  private settle(id: number, err: Error | null): void {
    const p = this.pending.get(id);
    if (!p) return;
    this.pending.delete(id);
    if (--p.slot.busy === 0) p.slot.worker.unref();
    if (err) p.reject(err);
    else p.resolve();
  }

  private failSlot(slot: Slot, err: Error): void {
    for (const [id, p] of this.pending) if (p.slot === slot) this.settle(id, new Error(`quantize worker failed: ${err.message}`));
    const i = this.slots.indexOf(slot);
    if (i < 0) return; // 'error' is followed by 'exit': one removal
    this.slots.splice(i, 1);
    if (this.slots.length === 0 && pool === this) pool = null;
  }
}

let pool: QuantizePool | null = null;
let parallelTensors = 0;

/** How many tensors took the worker pool so far (tests check the path they mean to test was the one taken). */
export function parallelQuantizeCount(): number {
  return parallelTensors;
}

/**
 * Tensor `name` (N, K) of `src` quantised per output channel, as quantizeInt8PerChannel(readFloat32(name)) would,
 * on loadThreads() threads when it is big; read from the int8 cache (int8-cache.ts) when it is on and holds it.
 */
export async function quantizeInt8FromCheckpoint(src: ChunkSource, name: string, N: number, K: number): Promise<QuantizedInt8> {
  return cachedInt8(src, name, N, K, () => quantizeFresh(src, name, N, K));
}

async function quantizeFresh(src: ChunkSource, name: string, N: number, K: number): Promise<QuantizedInt8> {
  const e = src.entry(name);
  const threads = loadThreads();
  const parallel = threads > 1 && N * K >= PARALLEL_MIN_ELEMENTS && (e.dtype === 'F32' || e.dtype === 'F16' || e.dtype === 'BF16');
  if (!parallel) return quantizeInt8PerChannel(await readWholeFloat32(src, name), N, K);
  if (numelOf(e.shape) !== N * K) throw new RangeError(`quantizeInt8PerChannel: ${numelOf(e.shape)} values for (N, K) = (${N}, ${K})`);
  const rowBytes = K * SAFE_DTYPE_BYTES[e.dtype];
  const raw = new SharedArrayBuffer(N * rowBytes);
  const rawBytes = new Uint8Array(raw);
  const q = new SharedArrayBuffer(N * K);
  const scales = new SharedArrayBuffer(N * 4);
  pool ??= new QuantizePool(threads);
  const workers = pool;
  // a few blocks per thread, so one slow thread does not hold the others up; each block goes to the pool as soon as
  // its rows are read, so quantising overlaps the rest of the read
  const blocks = Math.min(N, workers.size * 4);
  const per = Math.ceil(N / blocks);
  const jobs: Promise<void>[] = [];
  let first = 0;
  const dispatch = (rowsRead: number) => {
    for (; first < N && Math.min(first + per, N) <= rowsRead; first += per) {
      const job = workers.run({ raw, dtype: e.dtype, K, first, rows: Math.min(per, N - first), q, scales }, jobs.length);
      job.catch(() => undefined); // settled below, after the read
      jobs.push(job);
    }
  };
  await src.readChunks(name, 8 << 20, (bytes, off) => {
    rawBytes.set(bytes, off);
    dispatch(Math.floor((off + bytes.byteLength) / rowBytes));
  });
  dispatch(N);
  const results = await Promise.allSettled(jobs);
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
  parallelTensors++;
  // copied out of shared memory: Dawn's queue.writeBuffer refuses SharedArrayBuffer data ("no overload matched",
  // npm webgpu on lavapipe, 2026-11-28), so uploads and host copies get plain ArrayBuffers, as before
  return { q: new Int8Array(new Int8Array(q)), scales: new Float32Array(new Float32Array(scales)), N, K };
}
