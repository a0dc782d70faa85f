// The Engine: one device, its buffer pool, the kernel cache and the recorder, plus tensor creation,
// upload and readback. Op families live in ops/<family>.ts as free functions taking the engine first.
import { totalmem } from 'node:os';
import { DeviceLostError, GpuDevice, type DeviceDescription, type DeviceOptions } from './device';
import { DTYPE_BYTES, decode, encode, type DType } from './dtype';
import { KernelCache } from './kernels';
import { BufferPool, type PoolStats } from './memory';
import { contiguous } from './ops/elementwise';
import { Recorder } from './recorder';
import { Scopes, type Owned } from './scope';
import { Storage, Tensor, fmtShape, numelOf } from './tensor';
import { BufferUsage, MapMode } from './webgpu';
import { Profiler } from './profiler';
import { adapterProfile, type AdapterProfile } from './plan-device';
import { engineSettings, type EngineSettings } from './settings';
import { TENSOR_CORES_UNCHECKED, type TensorCoreState } from './tensor-core-state';
import { loadTuning, type Tuning } from './tuning';
import { SUBGROUP_TILES } from './ops/matmul_subgroup';
import { ATTENTION_TILES } from './ops/attention_tiles';

export interface EngineOptions extends DeviceOptions {
  /** Error scopes around pipeline creation, bind groups and submits: errors name the kernel. Default:
   * KILN_ENGINE_DEBUG=1 (settings.ts), and the test helpers turn it on. Costs a little per dispatch. */
  debug?: boolean;
  /** GPU bytes this process may hold (WebGPU cannot ask the driver). Default: half the RAM on a software
   * adapter, 64 GiB otherwise; the config should set it (about 130 GiB on an H200). */
  memoryBudgetBytes?: number;
  /** Dispatches per submit (16..64). Default 32. */
  submitEvery?: number;
  /** GPU time per kernel (profiler.ts; engine.profiler.report()): each dispatch in a pass of its own, timed by
   * timestamp queries. Default: KILN_PROFILE=1 (settings.ts). Needs the adapter's timestamp-query. */
  profile?: boolean;
  /** Where the GEMM tuning tables are read from (tuning.ts). Default: the repository's tuning/. */
  tuningDir?: string;
}

/** Bytes per queue.writeBuffer call when uploading (keeps Dawn's staging small). */
export const UPLOAD_CHUNK_BYTES = 8 * 2 ** 20;

export class Engine {
  readonly pool: BufferPool;
  readonly kernels: KernelCache;
  readonly recorder: Recorder;
  readonly debug: boolean;
  /** The KILN_* switches (settings.ts), read once when this engine was created. */
  readonly settings: EngineSettings;
  /** Set when profiling was asked for (EngineOptions.profile). */
  readonly profiler: Profiler | null = null;
  /** The GEMM tuning table for this adapter (tuning.ts), read when the engine was created; defaults without one. */
  readonly tuning: Tuning;
  /** Whether 'auto' GEMMs and attention take the tensor-core kernels (tensor-cores.ts): unchecked (off unless
   * KILN_SUBGROUP_MATRIX=1 or a tuning table) until checkTensorCores' result is applied (useTensorCores). */
  tensorCores: TensorCoreState = TENSOR_CORES_UNCHECKED;
  private destroyed = false;
  /** Tensor scopes (scope.ts): Engine.empty gives each new storage to the current one. */
  readonly scopes = new Scopes();

  private constructor(
    readonly gpu: GpuDevice,
    opts: EngineOptions,
    settings: EngineSettings,
  ) {
    this.settings = settings;
    this.debug = opts.debug ?? settings.debug;
    const budget = opts.memoryBudgetBytes ?? (gpu.isSoftware ? totalmem() / 2 : 64 * 2 ** 30);
    this.pool = new BufferPool(gpu.device, budget, gpu.maxBindingBytes);
    this.kernels = new KernelCache(gpu.device, this.debug);
    this.recorder = new Recorder(gpu, this.kernels, Math.min(64, Math.max(1, opts.submitEvery ?? 32)), this.debug);
    this.pool.onTrim = () => this.recorder.groups.clear();
    const info = gpu.adapter.info;
    this.tuning = loadTuning(
      { vendor: info.vendor, architecture: info.architecture, device: info.device, driver: info.description },
      Object.keys(SUBGROUP_TILES),
      opts.tuningDir,
      undefined,
      Object.keys(ATTENTION_TILES),
    );
    if (opts.profile ?? settings.profile) {
      if (!gpu.hasFeature('timestamp-query')) throw new Error(`engine: profiling needs timestamp-query, which adapter ${gpu.describe().name} lacks`);
      this.profiler = this.recorder.profiler = new Profiler(gpu.device);
    }
    gpu.device.onuncapturederror = (ev) => {
      const recent = this.recorder.recent.slice(-4).join(', ') || 'no kernel recorded yet';
      this.recorder.uncaptured ??= new Error(`webgpu error (near ${recent}): ${ev.error.message}`);
    };
  }

  static async create(opts: EngineOptions = {}): Promise<Engine> {
    const settings = engineSettings();
    return new Engine(await GpuDevice.create(opts, settings), opts, settings);
  }

  /**
   * The shape-only engine (plan-device.ts): every op checks its shapes, picks its kernel for `adapter` and is
   * counted (recorder.meter, the pool's stats), but nothing is allocated on a device and nothing runs; reads give
   * zeros and loaders skip the checkpoint's bytes (`shapeOnly`). The budget defaults to unbounded, so a plan
   * reports a peak beyond any card instead of failing at it.
   */
  static createShapeOnly(adapter: AdapterProfile | string, opts: Pick<EngineOptions, 'memoryBudgetBytes' | 'submitEvery' | 'tuningDir'> = {}): Engine {
    const p = typeof adapter === 'string' ? adapterProfile(adapter) : adapter;
    return new Engine(GpuDevice.planned(p), { memoryBudgetBytes: Number.MAX_SAFE_INTEGER, ...opts, debug: false, profile: false }, engineSettings());
  }

  /** True for the shape-only engine: tensors have shapes and pool accounting but no contents. */
  get shapeOnly(): boolean {
    return this.gpu.plannedFor !== null;
  }

  get device(): GPUDevice {
    return this.gpu.device;
  }

  get lost(): boolean {
    return this.gpu.lost;
  }

  describe(): DeviceDescription & { memory: PoolStats; tensorCores: TensorCoreState } {
    return { ...this.gpu.describe(), memory: this.pool.stats(), tensorCores: this.tensorCores };
  }

  /** Applies a tensor-core check's result (checkTensorCores) to this engine's 'auto' ops. */
  useTensorCores(state: TensorCoreState): void {
    this.tensorCores = state;
  }

  /** True if a job needing `bytes` more GPU memory can start (see BufferPool.canFit). */
  canFit(bytes: number): boolean {
    return this.pool.canFit(bytes);
  }

  /**
   * Runs fn in a tensor scope (scope.ts): the tensors it makes are freed when it returns or throws (or, for an
   * async fn, when its promise settles), except those it returns, which go to the enclosing scope.
   */
  scope<T>(fn: () => T, name?: string): T {
    return this.scopes.run(fn, name);
  }

  /** first() then each link on the previous result, each intermediate freed once the next exists (scope.ts). */
  chain(first: () => Tensor, ...links: ((t: Tensor) => Tensor)[]): Tensor {
    return this.scopes.chain(first, ...links);
  }

  /** Runs fn outside every tensor scope: what it makes is the caller's (callbacks a forward calls, e.g. captures). */
  unscoped<T>(fn: () => T): T {
    return this.scopes.unscoped(fn);
  }

  /** Takes the tensors in `value` out of their scope (the caller frees them, or an owner does). Returns value. */
  keep<T>(value: T): T {
    return this.scopes.keep(value);
  }

  /** Runs fn (a module's load) in an owner: `owner.free()` frees every tensor fn made, in one call. */
  owned<T>(fn: () => T, name?: string): T extends PromiseLike<infer V> ? Promise<Owned<V>> : Owned<T> {
    return this.scopes.owned(fn, name);
  }

  /** A contiguous tensor with undefined contents (from the pool; free() it when done, or let its scope). */
  empty(shape: readonly number[], dtype: DType = 'f32', label?: string): Tensor {
    this.gpu.assertAlive();
    const bytes = numelOf(shape) * DTYPE_BYTES[dtype];
    const name = label ?? `${dtype}${fmtShape(shape)}`;
    const pooled = this.pool.acquire(Math.max(16, bytes), name);
    const storage = new Storage(pooled, bytes, (p) => this.pool.release(p), name);
    this.scopes.adopt(storage);
    return new Tensor(storage, shape, dtype);
  }

  /** Uploads host values (converted to dtype) into a new contiguous tensor. */
  upload(values: ArrayLike<number>, shape: readonly number[], dtype: DType = 'f32', label?: string): Tensor {
    if (values.length !== numelOf(shape)) throw new RangeError(`upload: ${values.length} values for shape ${fmtShape(shape)}`);
    const t = this.empty(shape, dtype, label);
    this.write(t, values);
    return t;
  }

  /** Overwrites a contiguous tensor with host values. */
  write(t: Tensor, values: ArrayLike<number>): void {
    if (values.length !== t.numel) throw new RangeError(`write: ${values.length} values into ${t}`);
    this.writeBytes(t, 0, encode(values, t.dtype));
  }

  /** Fills a tensor with one value (NaN poisons outputs in tests). */
  fill(t: Tensor, value: number): void {
    this.write(t, new Float32Array(t.numel).fill(value));
  }

  /**
   * Writes bytes already in t's dtype at `byteOffset` within t, in UPLOAD_CHUNK_BYTES pieces. The tensor must
   * be contiguous; offsets must be 4-byte aligned (a short tail is zero-padded when it ends the storage).
   * Flushes recorded work first, so the write lands after everything recorded before it.
   */
  writeBytes(t: Tensor, byteOffset: number, bytes: Uint8Array): void {
    this.gpu.assertAlive();
    if (!t.isContiguous) throw new Error(`write: ${t} is a non-contiguous view`);
    const start = t.offset * t.bytesPerElement + byteOffset;
    const end = start + bytes.byteLength;
    if (byteOffset < 0 || byteOffset + bytes.byteLength > t.numel * t.bytesPerElement) {
      throw new RangeError(`write: ${bytes.byteLength} bytes at ${byteOffset} overrun ${t}`);
    }
    if (start % 4 !== 0 || (end % 4 !== 0 && end < t.storage.byteLength)) {
      throw new RangeError(`write: ${t} bytes ${start}..${end} are not 4-byte aligned`);
    }
    this.recorder.flush();
    const buffer = t.storage.buffer;
    for (let off = 0; off < bytes.byteLength; off += UPLOAD_CHUNK_BYTES) {
      let chunk = bytes.subarray(off, Math.min(off + UPLOAD_CHUNK_BYTES, bytes.byteLength));
      if (chunk.byteLength % 4) {
        const padded = new Uint8Array(Math.ceil(chunk.byteLength / 4) * 4);
        padded.set(chunk);
        chunk = padded;
      }
      this.device.queue.writeBuffer(buffer, start + off, chunk.buffer, chunk.byteOffset, chunk.byteLength);
    }
  }

  /**
   * Reads a tensor back as float32 values in logical (row-major) order. Submits and waits for the GPU: call it
   * at stage ends only. Non-contiguous views are made contiguous on the GPU first.
   */
  async read(t: Tensor): Promise<Float32Array> {
    this.gpu.assertAlive();
    const aligned = t.isContiguous && (t.offset * t.bytesPerElement) % 4 === 0;
    const src = aligned ? t : contiguous(this, t);
    try {
      if (this.shapeOnly) return new Float32Array(t.numel); // the same work recorded, no contents
      const bytes = t.numel * t.bytesPerElement;
      const size = Math.max(4, Math.ceil(bytes / 4) * 4);
      const staging = this.device.createBuffer({ size, usage: BufferUsage.MAP_READ | BufferUsage.COPY_DST, label: `read ${t}` });
      try {
        this.recorder.copy(src.storage.buffer, src.offset * src.bytesPerElement, staging, 0, size);
        await this.recorder.sync();
        await staging.mapAsync(MapMode.READ);
        return decode(new Uint8Array(staging.getMappedRange()), t.dtype, t.numel);
      } finally {
        staging.destroy();
      }
    } finally {
      if (src !== t) src.free();
    }
  }

  /** Submits everything recorded, waits, and throws the first WebGPU error (with the kernel's name). */
  sync(): Promise<void> {
    return this.recorder.sync();
  }

  /**
   * Waits for everything recorded or in flight (GPU work, and in debug mode its error scopes), then destroys. Use
   * this to end a process: destroying with Dawn callbacks still owed made lavapipe abort, segfault or hang at exit
   * (conv1d.test's input-check test, which leaves a weight preparation unsynced, 30 of 30 runs alone; 0 of 30 after). The first
   * error of that last work is thrown after the engine is gone, as sync() would have.
   */
  async shutdown(): Promise<void> {
    if (this.destroyed) return;
    try {
      if (!this.lost) await this.sync();
    } finally {
      this.destroy();
    }
  }

  /** Frees all GPU memory and the device at once, work in flight or not (prefer shutdown()). Idempotent. */
  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    this.recorder.destroy();
    this.profiler?.destroy();
    this.pool.destroy();
    this.gpu.destroy();
  }
}

/**
 * Holds the process's engine and rebuilds it after a device loss, so the next job runs. Tensors (weights
 * included) from a lost engine are gone: callers reload what they need when `generation` changes.
 */
export class EngineHolder {
  private current: Engine | null = null;
  private creating: Promise<Engine> | null = null;
  private readonly signals: AbortSignal[] = [];
  /** Bumped each time a new engine is built. */
  generation = 0;

  /** `onCreated` runs on each engine made before anyone gets it (the GPU worker checks its tensor-core kernels there:
   * tensor-cores.ts). */
  constructor(
    private readonly opts: EngineOptions = {},
    private readonly onCreated?: (e: Engine) => Promise<void>,
  ) {}

  async get(): Promise<Engine> {
    if (this.current && !this.current.lost) return this.current;
    this.creating ??= Engine.create(this.opts).then(
      async (e) => {
        await this.onCreated?.(e);
        this.current = e;
        e.recorder.interrupt = this.signals.at(-1) ?? null;
        this.generation++;
        this.creating = null;
        return e;
      },
      (err: unknown) => {
        this.creating = null;
        throw err;
      },
    );
    return this.creating;
  }

  /**
   * GPU waits (sync, read) give up with WaitInterruptedError (recorder.ts) when `signal` fires, until the returned function is called:
   * the worker binds each running task's signal, so a DELETE ends any stage within a moment, not only at the
   * pipeline's own checks (a VAE decode is one long GPU wait). The latest bound signal applies (an interactive
   * request run at a job's safe point binds its own on top of the job's).
   */
  interruptOn(signal: AbortSignal): () => void {
    this.signals.push(signal);
    this.applySignal();
    return () => {
      const i = this.signals.lastIndexOf(signal);
      if (i >= 0) this.signals.splice(i, 1);
      this.applySignal();
    };
  }

  private applySignal(): void {
    if (this.current) this.current.recorder.interrupt = this.signals.at(-1) ?? null;
  }

  /** Whether the engine built last has lost its device (the next get() builds another). */
  get lost(): boolean {
    return this.current?.lost ?? false;
  }

  /** The engine if one is built and alive, without building one. */
  peek(): Engine | null {
    return this.current && !this.current.lost ? this.current : null;
  }

  destroy(): void {
    this.current?.destroy();
    this.current = null;
  }

  /** Engine.shutdown() on the engine built last, if any: waits for its work, then destroys it. */
  async shutdown(): Promise<void> {
    const e = this.current;
    this.current = null;
    await e?.shutdown();
  }
}

export { DeviceLostError };
