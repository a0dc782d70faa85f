// The engine's switches from the environment, in one place: every KILN_* variable the engine reads is parsed here,
// typed, and nowhere else in src/engine (test/unit/layers.test.ts checks that no other engine file reads process.env).
// The engine imports nothing of the service, so it cannot take src/config/settings.ts; the worker's environment
// reaches the engine through this file alone.
//
// When they are read: engineSettings() reads process.env each time it is called, and it is called when an engine is
// created (Engine.create and Engine.createShapeOnly keep the result as `engine.settings`, which the ops read), when a
// device is opened (GpuDevice.create: the software-adapter default) and when a checkpoint tensor is quantised
// (loadThreads) or looked up in the int8 cache (cacheDir). A test or bench that sets a variable before it creates an engine gets it; a variable changed under a
// live engine takes effect with the next engine. A KILN_LOAD_THREADS that is not a whole number >= 1 is refused at
// the first of these reads (so at engine creation), with the message quantize-parallel.ts gave when it read it itself.
import { availableParallelism } from 'node:os';

export interface EngineSettings {
  /** KILN_SUBGROUP_MATRIX=1: an op's 'auto' path may take the subgroup-matrix (tensor-core) kernels, f16 GEMMs and
   * attention, where the adapter has the feature. Off by default until those kernels are timed on hardware. */
  subgroupMatrix: boolean;
  /** KILN_SUBGROUP_MATRIX=0: no tensor-core GEMM on 'auto', even where the adapter's tuning table (tuning.ts) picks
   * it for a shape class. Unset: the table decides (no table: off). */
  subgroupMatrixOff: boolean;
  /** KILN_SUBGROUP_TILE: the subgroup-matrix GEMM's tile preset by name (SUBGROUP_TILES in ops/matmul_subgroup.ts:
   * '64', '128'); unset: the largest preset that fits the adapter's workgroup memory. Any other value (even empty)
   * must name a preset: it is refused when a GEMM takes the subgroup path. */
  subgroupTile: string | undefined;
  /** KILN_W8A8=1: linear() with an int8 weight quantises its activations per token and runs the i8 x i8 tensor-core
   * GEMM (ops/matmul_w8a8.ts) where the adapter has it (else W8A16, the reason logged once). Opt-in: not yet
   * timed on a GPU nor held to a model's golden case. */
  w8a8?: boolean;
  /** KILN_SUBGROUP_ATTENTION=0: with subgroupMatrix, attention keeps the flash kernel (the tensor-core GEMM alone).
   * Any other value, or unset: attention takes the tensor-core kernel too. */
  subgroupAttention: boolean;
  /** KILN_SUBGROUP_ATTENTION_TILE: the tensor-core attention's tile preset by name (ATTENTION_TILES in
   * ops/attention_subgroup.ts, e.g. the generated 'g16x4k32'); unset: the file kernel's default. A name it does not
   * know is refused when attention takes the subgroup path. */
  subgroupAttentionTile: string | undefined;
  /** KILN_LOAD_THREADS: threads quantising a checkpoint's big tensors at load (quantize-parallel.ts), a whole number
   * >= 1, of which at most 16 are used; unset or empty: the machine's available parallelism (at most 16). */
  loadThreads: number;
  /** KILN_ALLOW_SOFTWARE_GPU: 1, true or yes (any case) allows a CPU/software adapter (llvmpipe) even where a GPU
   * device node exists; any other value refuses one. Unset or empty: undefined, and GpuDevice.create allows software
   * only where no GPU device node exists. DeviceOptions.allowSoftware overrides it. */
  allowSoftwareGpu: boolean | undefined;
  /** KILN_ENGINE_DEBUG=1: error scopes around pipeline creation, bind groups and submits, so errors name the kernel.
   * EngineOptions.debug overrides it. */
  debug: boolean;
  /** KILN_PROFILE=1: GPU time per kernel and grid (profiler.ts), each dispatch in a compute pass of its own.
   * EngineOptions.profile overrides it. */
  profile: boolean;
  /** KILN_CACHE_DIR: the root of Kiln's own caches (int8-cache.ts keeps quantised weights in its int8/ folder).
   * Unset, empty or `off`: no cache, unless the process sets one (useInt8Cache: the worker passes its setting). */
  cacheDir: string | undefined;
  /** KILN_DAWN_TOGGLES: 'fast' applies Dawn's production toggles (device.ts PRODUCTION_TOGGLES: validation and
   * robustness off) to every engine, 'safe' to none; unset or empty: undefined, and DeviceOptions.production decides
   * (the GPU worker: on, on a hardware adapter). Any other value is refused at engine creation. */
  dawnToggles: 'fast' | 'safe' | undefined;
}

/** The engine's settings from `env` (the process's environment by default), read at this call. */
export function engineSettings(env: NodeJS.ProcessEnv = process.env): EngineSettings {
  const software = env.KILN_ALLOW_SOFTWARE_GPU;
  return {
    subgroupMatrix: env.KILN_SUBGROUP_MATRIX === '1',
    subgroupMatrixOff: env.KILN_SUBGROUP_MATRIX === '0',
    subgroupTile: env.KILN_SUBGROUP_TILE,
    w8a8: env.KILN_W8A8 === '1',
    subgroupAttention: env.KILN_SUBGROUP_ATTENTION !== '0',
    subgroupAttentionTile: env.KILN_SUBGROUP_ATTENTION_TILE || undefined,
    loadThreads: parseLoadThreads(env.KILN_LOAD_THREADS),
    allowSoftwareGpu: software !== undefined && software !== '' ? /^(1|true|yes)$/i.test(software) : undefined,
    debug: env.KILN_ENGINE_DEBUG === '1',
    profile: env.KILN_PROFILE === '1',
    dawnToggles: parseDawnToggles(env.KILN_DAWN_TOGGLES),
    cacheDir: env.KILN_CACHE_DIR && env.KILN_CACHE_DIR.trim() !== '' && env.KILN_CACHE_DIR.trim().toLowerCase() !== 'off' ? env.KILN_CACHE_DIR.trim() : undefined,
  };
}

function parseDawnToggles(value: string | undefined): EngineSettings['dawnToggles'] {
  if (value === undefined || value.trim() === '') return undefined;
  const v = value.trim().toLowerCase();
  if (v === 'fast' || v === 'safe') return v;
  throw new Error(`KILN_DAWN_TOGGLES=${value}: must be fast (Dawn's validation and robustness off) or safe (on)`);
}

function parseLoadThreads(value: string | undefined): number {
  const n = value !== undefined && value !== '' ? Number(value) : availableParallelism();
  if (!Number.isInteger(n) || n < 1) throw new Error(`KILN_LOAD_THREADS=${value}: must be a whole number >= 1`);
  return Math.min(n, 16);
}
