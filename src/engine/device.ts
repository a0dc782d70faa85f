// Adapter and device: features, maximum limits, NVIDIA toggles, the software-adapter guard,
// device-lost tracking and a shutdown that lets Node exit. No Nest here (the engine never imports it).
import { existsSync, readdirSync } from 'node:fs';
import { planAdapterAndDevice, type AdapterProfile } from './plan-device';
import { engineSettings, type EngineSettings } from './settings';
import { loadDawn } from './webgpu';

/** Features we use when the adapter has them. Subgroup matrix (tensor cores) needs subgroups + shader-f16. */
export const WANTED_FEATURES = ['shader-f16', 'subgroups', 'chromium-experimental-subgroup-matrix', 'timestamp-query'] as const;

/** Dawn toggles for NVIDIA: f16 is hidden there without vulkan_enable_f16_on_nvidia; subgroup matrix needs
 * allow_unsafe_apis. See shared/spec/engine.md. */
export const NVIDIA_TOGGLES = ['allow_unsafe_apis', 'vulkan_enable_f16_on_nvidia', 'use_vulkan_memory_model'];

/** Dawn toggles for production runs (DeviceOptions.production, KILN_DAWN_TOGGLES=fast), on a hardware adapter only:
 *   skip_validation     Dawn's per-call checks of bind groups, dispatches and copies. Every call the engine makes
 *                       is the same code the test suite runs with validation on (lavapipe in CI, the GPU call's
 *                       safe engines), where a bad call is an error that names its kernel (KILN_ENGINE_DEBUG=1).
 *   disable_robustness  the bounds clamps Tint adds to every storage access. The kernels bound their own indices
 *                       (every one has a CPU-reference test at sizes no tile divides), and test/engine/dawn_toggles
 *                       holds each kernel family's output with the clamps off bit-identical to with them on.
 * Left on: workgroup memory's zero-initialisation (disable_workgroup_init): no test proves that no kernel reads
 * workgroup memory it has not written, and the cost is one store per element at a kernel's start. */
export const PRODUCTION_TOGGLES = ['skip_validation', 'disable_robustness'];

/** Every binding stays under 2 GiB whatever the adapter allows (32-bit indexing in shaders). */
export const MAX_BINDING_BYTES = 2 ** 31 - 256;

export interface DeviceOptions {
  /** Allow a CPU/software adapter (llvmpipe, SwiftShader). Default: env KILN_ALLOW_SOFTWARE_GPU (1/true/0/false);
   * otherwise allowed only on a machine with no /dev/nvidia* or /dev/dri/renderD* node. */
  allowSoftware?: boolean;
  /** Extra Dawn toggles (enable-dawn-features). */
  toggles?: string[];
  /** PRODUCTION_TOGGLES on a hardware adapter (the GPU worker's engines). KILN_DAWN_TOGGLES overrides it: 'fast'
   * applies them on any adapter (the GPU call's tests, test/engine/dawn_toggles), 'safe' never. */
  production?: boolean;
  powerPreference?: GPUPowerPreference;
}

export interface SubgroupMatrixConfig {
  componentType: string;
  resultComponentType: string;
  M: number;
  N: number;
  K: number;
}

/** Plain-object description for /api/health. */
export interface DeviceDescription {
  name: string;
  vendor: string;
  architecture: string;
  backend: string;
  software: boolean;
  features: string[];
  limits: {
    maxStorageBufferBindingSize: number;
    maxBufferSize: number;
    maxComputeWorkgroupStorageSize: number;
    maxComputeInvocationsPerWorkgroup: number;
    maxComputeWorkgroupsPerDimension: number;
    maxStorageBuffersPerShaderStage: number;
  };
  subgroupSizes: [number, number] | null;
  subgroupMatrixConfigs: SubgroupMatrixConfig[];
  toggles: string[];
  lost: string | null;
}

/** The engine was asked to run on a lost or destroyed device. */
export class DeviceLostError extends Error {
  override readonly name = 'DeviceLostError';
}

/** KILN_ALLOW_SOFTWARE_GPU when set, else software only where no GPU device node exists; callers with a validated
 * config pass explicit options instead. */
function softwareAllowedByDefault(settings: EngineSettings): boolean {
  return settings.allowSoftwareGpu ?? !gpuDeviceNodesPresent();
}

export function gpuDeviceNodesPresent(): boolean {
  const nvidia = existsSync('/dev/nvidiactl') || listDev('/dev').some((n) => /^nvidia\d+$/.test(n));
  const render = listDev('/dev/dri').some((n) => n.startsWith('renderD'));
  return nvidia || render;
}

function listDev(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

export function isSoftwareAdapter(info: GPUAdapterInfo): boolean {
  const text = `${info.vendor} ${info.architecture} ${info.device} ${info.description}`.toLowerCase();
  const fallback = (info as unknown as { isFallbackAdapter?: boolean }).isFallbackAdapter === true;
  return fallback || /llvmpipe|lavapipe|swiftshader|software/.test(text);
}

export class GpuDevice {
  /** Set once the device is lost or destroyed; every later use throws DeviceLostError. */
  lostReason: string | null = null;
  private gpu: GPU | null;

  private constructor(
    gpu: GPU,
    readonly adapter: GPUAdapter,
    readonly device: GPUDevice,
    readonly toggles: string[],
  ) {
    this.gpu = gpu;
    void device.lost.then((info) => {
      this.lostReason ??= `${info.reason}: ${info.message}`;
    });
  }

  static async create(opts: DeviceOptions = {}, settings: EngineSettings = engineSettings()): Promise<GpuDevice> {
    const dawn = await loadDawn();
    const allowSoftware = opts.allowSoftware ?? softwareAllowedByDefault(settings);
    // Toggles are instance options, so the vendor has to be guessed first: NVIDIA device nodes present ->
    // NVIDIA toggles; if the adapter turns out to be NVIDIA anyway, start once more with them.
    // production toggles: always with 'fast'; by default only where a GPU device node promises a hardware adapter
    // (a software one found anyway starts once more without them)
    const fast = settings.dawnToggles === 'fast' || (settings.dawnToggles === undefined && opts.production === true && gpuDeviceNodesPresent());
    let toggles = [...(existsSync('/dev/nvidiactl') ? NVIDIA_TOGGLES : []), ...(opts.toggles ?? []), ...(fast ? PRODUCTION_TOGGLES : [])];
    for (let attempt = 0; ; attempt++) {
      const flags = toggles.length ? [`enable-dawn-features=${toggles.join(',')}`] : [];
      const gpu = dawn.create(flags);
      const adapter = await gpu.requestAdapter({ powerPreference: opts.powerPreference ?? 'high-performance' });
      if (!adapter) {
        throw new Error('webgpu: no adapter (no Vulkan driver? on a machine without a GPU install Mesa lavapipe, see docs/engine.md)');
      }
      const info = adapter.info;
      if (info.vendor.toLowerCase().includes('nvidia') && !toggles.includes('vulkan_enable_f16_on_nvidia') && attempt === 0) {
        toggles = [...NVIDIA_TOGGLES, ...toggles];
        continue;
      }
      if (isSoftwareAdapter(info) && settings.dawnToggles !== 'fast' && toggles.some((t) => PRODUCTION_TOGGLES.includes(t))) {
        toggles = toggles.filter((t) => !PRODUCTION_TOGGLES.includes(t));
        continue;
      }
      if (isSoftwareAdapter(info) && !allowSoftware) {
        throw new Error(
          `webgpu: the adapter is a CPU/software one (${info.vendor} ${info.architecture} ${info.description}) but this machine has a GPU; ` +
            'check the container has the graphics driver capability, or set KILN_ALLOW_SOFTWARE_GPU=1 to run on the CPU anyway',
        );
      }
      const requiredFeatures = WANTED_FEATURES.filter((f) => adapter.features.has(f)) as GPUFeatureName[];
      const requiredLimits: Record<string, number> = {};
      for (const key in adapter.limits) {
        const v = (adapter.limits as unknown as Record<string, unknown>)[key];
        if (typeof v === 'number') requiredLimits[key] = v;
      }
      const device = await adapter.requestDevice({ requiredFeatures, requiredLimits, label: 'kiln' });
      return new GpuDevice(gpu, adapter, device, toggles);
    }
  }

  /** A device that allocates and runs nothing, standing for adapter `p` (plan-device.ts: the shape-only engine). */
  static planned(p: AdapterProfile): GpuDevice {
    const { adapter, device } = planAdapterAndDevice(p);
    const d = new GpuDevice(null as unknown as GPU, adapter, device, []);
    d.plannedFor = p;
    return d;
  }

  /** Set on a planned device (GpuDevice.planned): the adapter it stands for. */
  plannedFor: AdapterProfile | null = null;

  get lost(): boolean {
    return this.lostReason !== null;
  }

  hasFeature(name: string): boolean {
    return this.device.features.has(name);
  }

  /** The largest storage binding we allow: the adapter's limit, capped at 2 GiB. */
  get maxBindingBytes(): number {
    return Math.min(this.device.limits.maxStorageBufferBindingSize, MAX_BINDING_BYTES);
  }

  get isSoftware(): boolean {
    return isSoftwareAdapter(this.adapter.info);
  }

  assertAlive(): void {
    if (this.lostReason !== null) throw new DeviceLostError(`webgpu device lost (${this.lostReason}); rebuild the engine`);
  }

  describe(): DeviceDescription {
    const info = this.adapter.info;
    const lim = this.device.limits;
    const extra = info as unknown as {
      subgroupMatrixConfigs?: SubgroupMatrixConfig[];
      subgroupMinSize?: number;
      subgroupMaxSize?: number;
      backend?: string;
    };
    return {
      name: info.description || info.device || info.architecture || 'unknown',
      vendor: info.vendor,
      architecture: info.architecture,
      backend: extra.backend ?? 'vulkan',
      software: this.isSoftware,
      features: [...this.device.features].filter((f) => (WANTED_FEATURES as readonly string[]).includes(f)).sort(),
      limits: {
        maxStorageBufferBindingSize: lim.maxStorageBufferBindingSize,
        maxBufferSize: lim.maxBufferSize,
        maxComputeWorkgroupStorageSize: lim.maxComputeWorkgroupStorageSize,
        maxComputeInvocationsPerWorkgroup: lim.maxComputeInvocationsPerWorkgroup,
        maxComputeWorkgroupsPerDimension: lim.maxComputeWorkgroupsPerDimension,
        maxStorageBuffersPerShaderStage: lim.maxStorageBuffersPerShaderStage,
      },
      subgroupSizes: extra.subgroupMinSize ? [extra.subgroupMinSize, extra.subgroupMaxSize ?? extra.subgroupMinSize] : null,
      subgroupMatrixConfigs: (extra.subgroupMatrixConfigs ?? []).map((c) => ({
        componentType: c.componentType,
        resultComponentType: c.resultComponentType,
        M: c.M,
        N: c.N,
        K: c.K,
      })),
      toggles: this.toggles,
      lost: this.lostReason,
    };
  }

  /** Destroys the device and drops the Dawn instance so Node can exit. Idempotent. */
  destroy(): void {
    this.lostReason ??= 'destroyed: engine shut down';
    this.device.destroy();
    this.gpu = null;
  }
}
