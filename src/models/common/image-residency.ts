// The residency policy of an image job (Qwen-Image-2.1: qwen_image21/pipeline.ts, Krea 2: krea2/pipeline.ts): where
// the text encoder (a Qwen3-VL decoder, 14.19 GiB for Qwen-Image's 8B at f16, 8.15 GiB for Krea 2's 4B) is while the
// DiT samples, under the memory budget (issue 42 "Smaller GPUs"; docs/performance.md "Plans"). Cheapest first:
//   resident   the encoder stays on the GPU beside the DiT and the VAE for good (no bytes moved; the default budget)
//   offloaded  the encoder's weights go to host memory once the prompt is encoded (read back once, the host copy
//              kept) and are uploaded again before the next job's encoding: its bytes host-to-GPU a job, no disk read.
//              Chosen over freeing it and reloading from the checkpoint: a reload reads and converts the same bytes
//              from disk (seconds for 16 GB of safetensors) where an upload from host memory is one PCIe copy
//              (about 0.6 s for 14 GiB at 25 GB/s); the price is the host memory the copy holds.
//   streamed   the encoder's decoder layers live in host memory from the load on (Qwen3LoadOptions.layersOnHost) and
//              are uploaded in turn while encoding (two on the GPU at a time): the whole decoder's bytes host-to-GPU
//              per prompt encoded; embed_tokens and the vision tower (1.25 GiB for the 8B, 1.52 for the 4B) stay on
//              the GPU for the encoding, and are offloaded like a whole encoder after it when the sampling needs
//              the room (always when 'streamed' is forced: the most frugal placement).
// The layers' choice is made once, at the load, before the encoder loads (what the DiT and VAE hold, plus the whole
// encoder, against the budget); resident or offloaded per job, after its encoding (the weights plus the job's
// sampling working set, estimated per latent token, against the budget). DiT block streaming is not built for the
// image models: a job whose sampling does not fit beside the DiT is over the budget whatever the encoder does.
import { Engine } from '../../engine/engine';
import { releaseToHost, type HostHeld } from '../../engine/host-held';
import { adapterProfileOf } from '../../engine/plan-device';
import { Tensor } from '../../engine/tensor';

/** Where the text encoder is while the DiT samples ('auto': the cheapest that fits the budget, see the header). */
export type ImageTextResidency = 'auto' | 'resident' | 'offloaded' | 'streamed';

/** The policy's inputs among an image pipeline's options. */
export interface ImageResidencyOptions {
  /** GPU bytes a job may hold (default: the engine's pool budget, GPU_MEMORY_BUDGET). */
  memoryBudgetBytes?: number;
  /** Default 'auto'; tests force each. */
  textResidency?: ImageTextResidency;
  /** Told what each job did (a plan reports it). */
  onResidency?(r: ImageResidencyReport): void;
}

/** What one image job did about GPU memory. */
export interface ImageResidencyReport {
  textEncoder: 'resident' | 'offloaded' | 'streamed';
  /** Forced by the options, or the figures compared. */
  reason: string;
  budgetBytes: number;
  /** GPU bytes (pool size classes) of the DiT and the VAE, and of the whole text encoder on the GPU. */
  weightBytes: number;
  textEncoderBytes: number;
  /** The sampling's working set the per-job choice assumed (estimate, errs high). */
  samplingWorkingBytes: number;
  /** Host-to-GPU bytes the text encoder costs a job in steady state (offloaded: the upload before its encoding;
   * streamed: the layers uploaded while encoding this job's prompts), and GPU-to-host bytes this job read back. */
  hostToGpuBytes: number;
  gpuToHostBytes: number;
  /** Of those: the streamed layers' uploads this job, and the bytes moved to host memory after the encoding (uploaded
   * again before the next job's: the whole encoder when offloaded, its resident rest when streamed). */
  streamedBytes: number;
  offloadedBytes: number;
}

/** Encoding's working set beside the weights (a prompt of a few hundred tokens holds a few MiB; references more). */
const ENCODE_WORKING_BYTES = 2 ** 29;

/** Every tensor reachable from `root` through its fields (modules hold their weights in class instances, arrays and
 * plain objects), never through an Engine, a typed array or a Map's keys. */
export function tensorsOf(root: unknown): Tensor[] {
  const out: Tensor[] = [];
  const seen = new Set<object>();
  const walk = (v: unknown): void => {
    if (v === null || typeof v !== 'object' || seen.has(v)) return;
    seen.add(v);
    if (v instanceof Tensor) return void out.push(v);
    if (v instanceof Engine || ArrayBuffer.isView(v) || v instanceof ArrayBuffer) return;
    if (v instanceof Map) return void [...v.values()].forEach(walk);
    if (v instanceof Set) return void [...v].forEach(walk);
    for (const x of Object.values(v)) walk(x);
  };
  walk(root);
  return out;
}

/** GPU bytes (pool size classes) `load` takes, counted on a shape-only engine standing for `e` (headers read, no bytes). */
export async function sizedOnShapeEngine(e: Engine, load: (shape: Engine) => Promise<{ free(): void }>): Promise<number> {
  const shape = Engine.createShapeOnly(e.gpu.plannedFor ?? adapterProfileOf(e.describe(), Number.MAX_SAFE_INTEGER));
  try {
    const m = await load(shape);
    const bytes = shape.pool.stats().inUseBytes;
    m.free();
    return bytes;
  } finally {
    shape.destroy();
  }
}

/** The load's choice for the encoder's layers: streamed when forced, or (auto) when the DiT and the VAE already held
 * (`heldBytes`), the whole encoder (`textEncoderBytes()`, asked only then) and the encoding's working set exceed the budget. */
export async function streamTextLayers(o: ImageResidencyOptions, e: Engine, heldBytes: number, textEncoderBytes: () => Promise<number>): Promise<boolean> {
  const want = o.textResidency ?? 'auto';
  if (want !== 'auto') return want === 'streamed';
  const budget = o.memoryBudgetBytes ?? e.pool.stats().budgetBytes;
  return heldBytes + (await textEncoderBytes()) + ENCODE_WORKING_BYTES > budget;
}

/**
 * The loaded text encoder's place between jobs. `encoder` is the module (its GPU tensors are found through its fields,
 * tensorsOf); `streamed` whether it was loaded with its layers on the host; `uploaded()` the streamed layers' uploads
 * so far (Qwen3Model.layerOffload).
 */
export class TextEncoderResidency {
  private held: HostHeld | null = null;

  constructor(
    private readonly e: Engine,
    private readonly encoder: object,
    readonly streamed: boolean,
    /** GPU bytes of the DiT and the VAE, and the whole encoder's (sized at the load). */
    readonly weightBytes: number,
    readonly textEncoderBytes: number,
    private readonly uploaded: () => number,
  ) {}

  /** The encoder's weights on the GPU for an encoding (an offloaded one uploaded again). */
  beforeEncode(): { uploadedBefore: number } {
    if (this.held?.onHost) this.held.restore();
    return { uploadedBefore: this.uploaded() };
  }

  /**
   * After the job's encoding: keeps the encoder resident or moves it to host memory for the sampling (see the header),
   * and says what was done. `samplingWorkingBytes`: the job's estimate; `start`: beforeEncode's answer.
   */
  async afterEncode(o: ImageResidencyOptions, samplingWorkingBytes: number, start: { uploadedBefore: number }): Promise<ImageResidencyReport> {
    const want = o.textResidency ?? 'auto';
    const budgetBytes = o.memoryBudgetBytes ?? this.e.pool.stats().budgetBytes;
    const base = { budgetBytes, weightBytes: this.weightBytes, textEncoderBytes: this.textEncoderBytes, samplingWorkingBytes };
    // what stays on the GPU after the encoding unless offloaded: the whole encoder, or the streamed one's rest
    const onGpu = tensorsOf(this.encoder).filter((t) => !t.storage.freed && !t.storage.onHost);
    const restBytes = [...new Set(onGpu.map((t) => t.storage))].reduce((a, st) => a + st.pooled.size, 0);
    const streamedBytes = this.streamed ? this.uploaded() - start.uploadedBefore : 0;
    const offload = want === 'auto' ? this.weightBytes + restBytes + samplingWorkingBytes > budgetBytes : want === 'offloaded' || want === 'streamed';
    const textEncoder = this.streamed ? 'streamed' : offload ? 'offloaded' : 'resident';
    const why = this.streamed ? (want === 'streamed' ? 'forced (streamed)' : 'the DiT, the VAE and the whole text encoder exceed the budget: its layers are streamed while encoding') : '';
    if (!offload) {
      const reason = why || (want === 'auto' ? 'the weights and the sampling fit the budget together' : `forced (${want})`);
      return { ...base, textEncoder, reason, hostToGpuBytes: streamedBytes, gpuToHostBytes: 0, streamedBytes, offloadedBytes: 0 };
    }
    let gpuToHostBytes = 0;
    if (this.held) this.held.evict();
    else {
      this.held = await releaseToHost(this.e, onGpu, { keep: true });
      gpuToHostBytes = this.held.bytes;
    }
    const reason = [why, want === 'auto' ? `the weights, the text encoder${this.streamed ? '\'s resident rest' : ''} and the sampling together exceed the budget: it waits in host memory while the DiT samples` : want === 'offloaded' ? 'forced (offloaded)' : ''].filter(Boolean).join('; ');
    // steady state: the next job uploads what this one moved off (the first job's encoder came from its load)
    const offloadedBytes = this.held.bytes;
    return { ...base, textEncoder, reason, hostToGpuBytes: streamedBytes + offloadedBytes, gpuToHostBytes, streamedBytes, offloadedBytes };
  }
}
