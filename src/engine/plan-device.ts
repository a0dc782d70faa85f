// A WebGPU device that allocates nothing and runs nothing: the engine's shape-only mode (Engine.createShapeOnly).
// Every call the engine makes of a GPUDevice is answered with an object of the right shape: buffers are sizes
// (mapping one gives zeros), pipelines and bind groups are labels, submits do nothing. The engine around it is the
// real one: ops check their shapes and pick their kernels from the adapter's features and limits as on a GPU, the
// buffer pool rounds and counts every tensor as it would, and the recorder counts every dispatch. So a pipeline run
// on it says what the same run would hold and do on that adapter, without the adapter, in seconds.
// Only the members the engine uses are implemented (device.ts, kernels.ts, recorder.ts, memory.ts, engine.ts).
import type { DeviceDescription } from './device';

/** The adapter a plan stands for: what changes the engine's choices (features: f16 compute, tensor-core kernels;
 * limits: the largest binding, workgroup counts) and what a plan's report names. */
export interface AdapterProfile {
  /** Short name for the CLI (`h200`, `lavapipe`). */
  id: string;
  /** As describe() names an adapter. */
  name: string;
  vendor: string;
  /** As the adapter's info names its architecture, where a run on it recorded that (a plan's tuning table is
   * matched by vendor and this; unknown: by vendor alone). */
  architecture?: string;
  software: boolean;
  features: readonly string[];
  /** The limits describe() reports, and the uniform offset alignment the recorder's params ring relies on. */
  limits: DeviceDescription['limits'] & { minUniformBufferOffsetAlignment: number };
  /** GPU memory, bytes (the default budget of a plan is this less a margin). */
  memoryBytes: number;
}

/** Adapters with recorded facts (docs/performance.md "First GPU run"; this box's lavapipe). */
export const ADAPTERS: Record<string, AdapterProfile> = {
  h200: {
    id: 'h200',
    name: 'NVIDIA H200',
    vendor: 'nvidia',
    software: false,
    features: ['shader-f16', 'subgroups', 'chromium-experimental-subgroup-matrix', 'timestamp-query'],
    limits: {
      maxStorageBufferBindingSize: 2147483644,
      maxBufferSize: 2 ** 40,
      maxComputeWorkgroupStorageSize: 48 * 1024,
      maxComputeInvocationsPerWorkgroup: 1024,
      maxComputeWorkgroupsPerDimension: 65535,
      maxStorageBuffersPerShaderStage: 10,
      minUniformBufferOffsetAlignment: 256,
    },
    memoryBytes: 143771 * 2 ** 20,
  },
  lavapipe: {
    id: 'lavapipe',
    name: 'llvmpipe (LLVM, 256 bits)',
    vendor: 'mesa',
    architecture: 'software',
    software: true,
    features: ['shader-f16', 'subgroups'],
    limits: {
      maxStorageBufferBindingSize: 128 * 2 ** 20,
      maxBufferSize: 2 ** 31,
      maxComputeWorkgroupStorageSize: 32 * 1024,
      maxComputeInvocationsPerWorkgroup: 1024,
      maxComputeWorkgroupsPerDimension: 65535,
      maxStorageBuffersPerShaderStage: 8,
      minUniformBufferOffsetAlignment: 64,
    },
    memoryBytes: 24 * 2 ** 30,
  },
};

/** The adapter profile named `id`, or an error listing the known ones. */
export function adapterProfile(id: string): AdapterProfile {
  const p = ADAPTERS[id.toLowerCase()];
  if (!p) throw new Error(`unknown adapter "${id}"; known: ${Object.keys(ADAPTERS).join(', ')}`);
  return p;
}

class PlanBuffer {
  constructor(
    readonly size: number,
    readonly label: string,
  ) {}
  destroy(): void {}
  async mapAsync(): Promise<void> {}
  getMappedRange(): ArrayBuffer {
    return new ArrayBuffer(this.size);
  }
  unmap(): void {}
}

class PlanPass {
  setPipeline(): void {}
  setBindGroup(): void {}
  dispatchWorkgroups(): void {}
  end(): void {}
}

class PlanEncoder {
  beginComputePass(): PlanPass {
    return new PlanPass();
  }
  copyBufferToBuffer(): void {}
  resolveQuerySet(): void {}
  finish(): object {
    return {};
  }
}

/** The GPUAdapter and GPUDevice of a plan (cast to the WebGPU types where the engine takes them). */
export function planAdapterAndDevice(p: AdapterProfile): { adapter: GPUAdapter; device: GPUDevice } {
  const features = new Set(p.features);
  const info = { vendor: p.vendor, architecture: p.software ? 'llvmpipe' : p.id, device: p.name, description: `${p.name} (planned: nothing runs)` };
  const device = {
    label: 'kiln plan',
    features,
    limits: { ...p.limits },
    lost: new Promise<never>(() => undefined),
    queue: {
      writeBuffer(): void {},
      submit(): void {},
      async onSubmittedWorkDone(): Promise<void> {},
    },
    onuncapturederror: null as unknown,
    createBuffer: (d: { size: number; label?: string }) => new PlanBuffer(d.size, d.label ?? ''),
    createShaderModule: (d: { label?: string }) => ({ label: d.label ?? '', getCompilationInfo: async () => ({ messages: [] }) }),
    createComputePipeline: (d: { label?: string }) => ({ label: d.label ?? '', getBindGroupLayout: () => ({}) }),
    createComputePipelineAsync: async (d: { label?: string }) => ({ label: d.label ?? '', getBindGroupLayout: () => ({}) }),
    createBindGroup: (d: { label?: string }) => ({ label: d.label ?? '' }),
    createCommandEncoder: () => new PlanEncoder(),
    createQuerySet: () => ({ destroy(): void {} }),
    pushErrorScope(): void {},
    popErrorScope: async (): Promise<null> => null,
    destroy(): void {},
  };
  const adapter = { info, features, limits: device.limits };
  return { adapter: adapter as unknown as GPUAdapter, device: device as unknown as GPUDevice };
}

/** The profile of an adapter in hand (describe()), so a plan can stand for the device a test or bench runs on. */
export function adapterProfileOf(d: DeviceDescription, memoryBytes: number): AdapterProfile {
  return {
    id: 'this',
    name: d.name,
    vendor: d.vendor,
    software: d.software,
    features: d.features,
    limits: { ...d.limits, minUniformBufferOffsetAlignment: 256 },
    memoryBytes,
  };
}
