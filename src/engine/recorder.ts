// Recording dispatches: many dispatches share one compute pass, and the batch is submitted every
// `submitEvery` dispatches so the CPU keeps encoding while the GPU runs. Parameters go to a uniform ring
// (one 256-byte slot per dispatch, written with one writeBuffer just before the batch is submitted). A dispatch
// takes its bindings' preferred free slot (bind-groups.ts), so a repeated dispatch reuses its bind group.
//
// Ordering rule: everything goes through the one queue in order, so a buffer released to the pool and reused
// later is safe. queue.writeBuffer, however, jumps ahead of commands still being recorded: Engine.write()
// flushes the recorder first. Do the same before any direct queue.writeBuffer of your own.
import type { GpuDevice } from './device';
import { gpuQueueActivity, type Kernel, type KernelCache, type Params } from './kernels';
import { Tensor } from './tensor';
import { BufferUsage } from './webgpu';
import type { Profiler } from './profiler';
import { BindGroupCache, slotFor, type Binding } from './bind-groups';
import { Meter, type RateClass } from './meter';

export type { Binding } from './bind-groups';

export interface Dispatch {
  kernel: Kernel;
  /** Bound to @binding(1), @binding(2), ... in order (outputs first by convention). */
  bindings: readonly Binding[];
  /** Bound to @binding(0) as a uniform. */
  params?: Params | Uint8Array;
  /** Workgroup counts [x, y, z]; see grid1d() for flat element loops. */
  workgroups: readonly [number, number?, number?];
  /** Floating-point operations it does, for the meter (meter.ts); default one per element of bindings[0]. */
  flops?: number;
  /** The rate its work runs at, for the meter's per-class counts (meter.ts); default 'memory'. */
  rate?: RateClass;
  /** The dims it works on, for the meter's per-shape counts: 'gemm MxKxN' (xB when batched), 'attention ...'. */
  shape?: string;
}

const SLOT = 256; // >= every adapter's minUniformBufferOffsetAlignment; also the params binding's size
const SLOTS = 256;
const RING_BYTES = SLOTS * SLOT;

export class Recorder {
  private encoder: GPUCommandEncoder | null = null;
  private pass: GPUComputePassEncoder | null = null;
  private readonly ring: GPUBuffer;
  private readonly staging = new Uint8Array(RING_BYTES);
  private readonly slotTaken = new Uint8Array(SLOTS);   // this batch's slots
  private slotsTaken = 0;
  private slotsEnd = 0;                                 // one past the highest slot taken: the bytes to write
  /** Bind groups kept across dispatches (bind-groups.ts). */
  readonly groups = new BindGroupCache();
  private batch: string[] = []; // kernel names in the open batch, for error messages
  private readonly checks: Promise<void>[] = [];
  /** Dispatches recorded since the engine was made (tests count them; fusion lowers it). */
  dispatchCount = 0;
  /** Dispatches, FLOPs and bytes bound, counted as recorded (meter.ts). */
  readonly meter = new Meter();
  submitCount = 0;
  /** Set by the engine when profiling: every dispatch then gets a timed pass of its own. */
  profiler: Profiler | null = null;
  /** Set by the engine's uncaptured-error handler; thrown by sync(). */
  uncaptured: Error | null = null;
  /** While set (EngineHolder.interruptOn: the task running now), sync() stops waiting when it fires and throws
   * WaitInterruptedError. The GPU still finishes the work already submitted (WebGPU cannot recall it); the queue is in
   * order, so later work, a next task's included, runs after it and sees it complete. */
  interrupt: AbortSignal | null = null;

  constructor(
    private readonly gpu: GpuDevice,
    private readonly kernels: KernelCache,
    readonly submitEvery: number,
    private readonly debug: boolean,
  ) {
    this.ring = gpu.device.createBuffer({ size: RING_BYTES, usage: BufferUsage.UNIFORM | BufferUsage.COPY_DST, label: 'params ring' });
  }

  get device(): GPUDevice {
    return this.gpu.device;
  }

  /** Kernel names of the batch being recorded (the last error's likely suspects). */
  get recent(): readonly string[] {
    return this.batch;
  }

  dispatch(d: Dispatch): void {
    this.gpu.assertAlive();
    const [x, y = 1, z = 1] = d.workgroups;
    const max = this.device.limits.maxComputeWorkgroupsPerDimension;
    if (!(x >= 1 && y >= 1 && z >= 1 && x <= max && y <= max && z <= max)) {
      throw new RangeError(`${d.kernel.name}: workgroups [${x},${y},${z}] (each must be 1..${max})`);
    }
    const params = d.params instanceof Uint8Array ? d.params : d.params?.bytes();
    if (params && params.byteLength > SLOT) throw new RangeError(`${d.kernel.name}: params ${params.byteLength} B > ${SLOT} B`);
    // before the params are staged: a flush resets the ring, and this dispatch's slot must go out with it
    if ((params && this.slotsTaken === SLOTS) || this.profiler?.full) this.flush();

    const key = BindGroupCache.key(d.kernel, d.bindings);
    let slot = -1;
    if (params) {
      slot = this.takeSlot(key ? slotFor(key, SLOTS) : this.slotsEnd % SLOTS);
      this.staging.set(params, slot * SLOT);
    }
    const make = () => this.createGroup(d, slot);
    const group = key ? this.groups.get(key, slot, make) : make();

    const pass = this.profiler ? this.timedPass(`${d.kernel.name} [${x},${y},${z}]`) : this.openPass();
    pass.setPipeline(d.kernel.pipeline);
    pass.setBindGroup(0, group);
    pass.dispatchWorkgroups(x, y, z);
    if (this.profiler) { pass.end(); this.pass = null; }
    this.batch.push(d.kernel.name);
    this.dispatchCount++;
    this.meter.dispatch(d.bindings, d.flops, d.rate, d.shape);
    if (this.batch.length >= this.submitEvery) this.flush();
  }

  /** The first free slot from `preferred` on (wrapping); the caller has made sure one is free. */
  private takeSlot(preferred: number): number {
    let s = preferred;
    while (this.slotTaken[s]) s = (s + 1) % SLOTS;
    this.slotTaken[s] = 1;
    this.slotsTaken++;
    this.slotsEnd = Math.max(this.slotsEnd, s + 1);
    return s;
  }

  private createGroup(d: Dispatch, slot: number): GPUBindGroup {
    const entries: GPUBindGroupEntry[] = [];
    if (slot >= 0) entries.push({ binding: 0, resource: { buffer: this.ring, offset: slot * SLOT, size: SLOT } });
    d.bindings.forEach((b, i) => {
      const resource = b instanceof Tensor ? { buffer: b.storage.buffer, offset: 0, size: b.storage.pooled.size } : b;
      entries.push({ binding: i + 1, resource });
    });
    if (this.debug) this.device.pushErrorScope('validation');
    const group = this.device.createBindGroup({ layout: d.kernel.layout, entries, label: d.kernel.name });
    if (this.debug) this.check(this.device.popErrorScope(), d.kernel.name);
    return group;
  }

  /** Records a buffer copy in order with the dispatches (ends the open pass; the next dispatch opens another). */
  copy(src: GPUBuffer, srcOffset: number, dst: GPUBuffer, dstOffset: number, size: number): void {
    this.gpu.assertAlive();
    this.openPass();
    this.pass!.end();
    this.pass = null;
    this.encoder!.copyBufferToBuffer(src, srcOffset, dst, dstOffset, size);
    this.batch.push('copyBufferToBuffer');
  }

  /** Submits what is recorded (with its params). Cheap when nothing is pending. */
  flush(): void {
    if (!this.encoder) return;
    this.pass?.end();
    this.pass = null;
    if (this.slotsEnd) this.device.queue.writeBuffer(this.ring, 0, this.staging, 0, this.slotsEnd * SLOT);
    const names = this.batch;
    const timed = this.profiler?.resolve(this.encoder);
    if (this.debug) this.device.pushErrorScope('validation');
    this.device.queue.submit([this.encoder.finish()]);
    gpuQueueActivity.submitted();
    if (this.debug) this.check(this.device.popErrorScope(), summarize(names));
    timed?.();
    this.encoder = null;
    this.slotTaken.fill(0);
    this.slotsTaken = 0;
    this.slotsEnd = 0;
    this.batch = [];
    this.submitCount++;
  }

  /** Flushes, waits for the GPU, and throws the first error recorded meanwhile (named after its kernel).
   * dawn.node spins a core while this waits: call it at stage ends, not per step. */
  async sync(): Promise<void> {
    this.flush();
    await unlessInterrupted(this.device.queue.onSubmittedWorkDone(), this.interrupt);
    gpuQueueActivity.drained();
    const checks = [...this.kernels.pendingChecks.splice(0), ...this.checks.splice(0)];
    for (const r of await Promise.allSettled(checks)) if (r.status === 'rejected') throw r.reason;
    if (this.uncaptured) {
      const e = this.uncaptured;
      this.uncaptured = null;
      throw e;
    }
    this.gpu.assertAlive();
  }

  destroy(): void {
    this.encoder = null;
    this.pass = null;
    this.groups.clear();
    this.ring.destroy();
  }

  private openPass(): GPUComputePassEncoder {
    this.encoder ??= this.device.createCommandEncoder({ label: 'kiln' });
    this.pass ??= this.encoder.beginComputePass();
    return this.pass;
  }

  /** A pass for one dispatch, its begin and end timestamped (profiling). */
  private timedPass(kernel: string): GPUComputePassEncoder {
    this.pass?.end();
    this.encoder ??= this.device.createCommandEncoder({ label: 'kiln' });
    this.pass = this.encoder.beginComputePass({ timestampWrites: this.profiler!.next(kernel) });
    return this.pass;
  }

  private check(scope: Promise<GPUError | null>, what: string): void {
    const p = scope.then((err) => {
      if (err) throw new Error(`webgpu validation error in ${what}: ${err.message}`);
    });
    p.catch(() => undefined); // thrown by sync()
    this.checks.push(p);
  }
}

function summarize(names: string[]): string {
  const uniq = [...new Set(names)];
  return uniq.length <= 4 ? uniq.join(', ') : `${uniq.slice(0, 4).join(', ')} and ${uniq.length - 4} more kernels`;
}

/** Workgroup counts for a flat loop over n elements with `wg` threads per group, folded into y past the
 * per-dimension limit. The shader's index: gid.x + gid.y * (num_workgroups.x * wg). */
export function grid1d(n: number, wg: number, maxPerDim = 65535): [number, number] {
  const groups = Math.max(1, Math.ceil(n / wg));
  const x = Math.min(groups, maxPerDim);
  return [x, Math.ceil(groups / x)];
}

/** A wait given up because the task's signal fired (EngineHolder.interruptOn). The engine's own type, as the engine
 * imports nothing of the service; the worker's runner reads the signal itself, so it needs no particular class. */
export class WaitInterruptedError extends Error {
  override readonly name = 'WaitInterruptedError';
}

/** `work`, or WaitInterruptedError as soon as `signal` fires (`work` then goes on unobserved; its failure is dropped here,
 * the next sync reports a lost device). */
function unlessInterrupted<T>(work: Promise<T>, signal: AbortSignal | null): Promise<T> {
  if (!signal) return work;
  const cancelled = () => new WaitInterruptedError(typeof signal.reason === 'string' ? signal.reason : 'cancelled');
  if (signal.aborted) {
    work.catch(() => undefined);
    return Promise.reject(cancelled());
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => {
      work.catch(() => undefined);
      reject(cancelled());
    };
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(
      (v) => (signal.removeEventListener('abort', onAbort), resolve(v)),
      (err: unknown) => (signal.removeEventListener('abort', onAbort), reject(err)),
    );
  });
}
