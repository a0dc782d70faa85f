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
// sampling working set, estimated per latent token, against the budget).
// The DiT's blocks (common/block-stream.ts, as MiniMax H3's): 'auto' streams them from host memory while sampling
// (every block's bytes host-to-GPU per forward, two blocks on the GPU at a time) when the DiT and the VAE all resident
// plus the job's sampling working set exceed the budget, the text encoder having done what it can (offloaded or its
// rest offloaded while sampling, so it does not count). Decided first, as the DiT loads (the job it loads for; each
// block to host memory as it loads, so a streaming DiT is never whole on the GPU), and again for each job
// (placeBlocks: a smaller job takes them back onto the GPU when the encoding fits beside them too, a bigger one
// moves them off). The text encoder's choices then see only what stays on the GPU.
import { Engine } from '../../engine/engine';
import { releaseToHost, type HostHeld } from '../../engine/host-held';
import { adapterProfileOf } from '../../engine/plan-device';
import { Tensor } from '../../engine/tensor';
import type { BlockPlacement, BlockStream } from './block-stream';

/** Where the text encoder is while the DiT samples ('auto': the cheapest that fits the budget, see the header). */
export type ImageTextResidency = 'auto' | 'resident' | 'offloaded' | 'streamed';

/** The DiT's blocks while sampling: 'auto' (default) streams them when the weights and the sampling exceed the
 * budget (see the header); 'off' never; 'on' always (tests). */
export type ImageBlockOffload = 'auto' | 'off' | 'on';

/** The policy's inputs among an image pipeline's options. */
export interface ImageResidencyOptions {
  /** GPU bytes a job may hold (default: the engine's pool budget, GPU_MEMORY_BUDGET). */
  memoryBudgetBytes?: number;
  /** Default 'auto'; tests force each. */
  textResidency?: ImageTextResidency;
  /** Default 'auto'; tests force 'on'. */
  blockOffload?: ImageBlockOffload;
  /** Told what each job did (a plan reports it). */
  onResidency?(r: ImageResidencyReport): void;
}

/** What one image job did about GPU memory. */
export interface ImageResidencyReport {
  /** The DiT's blocks while sampling, their bytes in host memory (streamed: what one forward uploads), and what the
   * sampling uploaded for them (the pipeline fills it in once the sampling ends) over how many steps. */
  blocks: 'resident' | 'streamed';
  blockHostBytes: number;
  samplingHostToGpuBytes: number;
  steps: number;
  textEncoder: 'resident' | 'offloaded' | 'streamed';
  /** Forced by the options, or the figures compared. */
  reason: string;
  budgetBytes: number;
  /** GPU bytes (pool size classes) of the DiT and the VAE as placed for this job (streamed blocks: the two on the GPU
   * at a time), and of the whole text encoder on the GPU. */
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

function budgetOf(o: ImageResidencyOptions, e: Engine): number {
  return o.memoryBudgetBytes ?? e.pool.stats().budgetBytes;
}

/** Whether a job streams the DiT's blocks: forced, or (auto) the DiT and the VAE all resident (`allWeightBytes`) plus
 * the larger of the sampling's working set and what the encoding holds beside them (`encodeBytes`: the text encoder
 * on the GPU for it and its working set; 0 at the load, before the encoder's choice) exceed the budget. */
export function streamsBlocks(o: ImageResidencyOptions, e: Engine, allWeightBytes: number, samplingWorkingBytes: number, encodeBytes = 0): boolean {
  const want = o.blockOffload ?? 'auto';
  if (want !== 'auto') return want === 'on';
  return allWeightBytes + Math.max(samplingWorkingBytes, encodeBytes) > budgetOf(o, e);
}

/** The load's placement of the DiT's blocks (the transformers' `blocks` load option), decided once the first block is
 * on the GPU: `heldBytes()` what the load holds so far (the VAE, the DiT's first weights and that block), the other
 * blocks at its size, against the working set of the job it loads for (`samplingWorkingBytes`; without a job the fixed
 * part alone, so only a DiT that cannot be resident at all streams). */
export function blockPlacement(o: ImageResidencyOptions, e: Engine, heldBytes: () => number, samplingWorkingBytes: number): BlockPlacement {
  return ({ blockBytes, blocks }) => (streamsBlocks(o, e, heldBytes() + blockBytes * (blocks - 1), samplingWorkingBytes) ? 'host' : 'gpu');
}

/** The loaded DiT's blocks placed for a job (streamsBlocks, the encoding's need from `text`): moved to host memory or
 * back onto the GPU where they are not yet; true when anything moved. `allWeightBytes`: the DiT and the VAE with
 * every block resident. */
export async function placeBlocks(o: ImageResidencyOptions, e: Engine, stream: BlockStream, allWeightBytes: number, samplingWorkingBytes: number, text: TextEncoderResidency): Promise<boolean> {
  const want = streamsBlocks(o, e, allWeightBytes, samplingWorkingBytes, text.encodeBytes + ENCODE_WORKING_BYTES);
  if (want === stream.streamed) return false;
  if (want) await stream.offload();
  else stream.resident();
  return true;
}

/** The DiT and the VAE's GPU bytes as placed now: all resident (`allWeightBytes`), less the streamed blocks' but the
 * two a stream holds at a time. */
export function placedWeightBytes(stream: BlockStream, allWeightBytes: number): number {
  return stream.streamed ? allWeightBytes - stream.residentBytes + stream.streamingBytes : allWeightBytes;
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
    /** GPU bytes of the DiT and the VAE as placed now (placedWeightBytes), and the whole encoder's (sized at the load). */
    private readonly placedWeights: () => number,
    readonly textEncoderBytes: number,
    private readonly uploaded: () => number,
    /** A streamed encoder's layers on the GPU at a time (two layers' pool bytes); 0 when resident. */
    private readonly streamingLayerBytes = 0,
  ) {
    // a streamed encoder's resident rest (embeddings, vision tower), on the GPU at the load
    this.restBytes = this.onGpuBytes();
  }

  private readonly restBytes: number;

  private onGpuBytes(): number {
    const onGpu = tensorsOf(this.encoder).filter((t) => !t.storage.freed && !t.storage.onHost);
    return [...new Set(onGpu.map((t) => t.storage))].reduce((a, st) => a + st.pooled.size, 0);
  }

  get weightBytes(): number {
    return this.placedWeights();
  }

  /** GPU bytes the encoder holds while encoding: the whole of it, or a streamed one's rest and two layers. */
  get encodeBytes(): number {
    return this.streamed ? this.restBytes + this.streamingLayerBytes : this.textEncoderBytes;
  }

  /** The encoder's weights on the GPU for an encoding (an offloaded one uploaded again). */
  beforeEncode(): { uploadedBefore: number } {
    if (this.held?.onHost) this.held.restore();
    return { uploadedBefore: this.uploaded() };
  }

  /**
   * After the job's encoding: keeps the encoder resident or moves it to host memory for the sampling (see the header),
   * and says what was done. `samplingWorkingBytes`: the job's estimate; `start`: beforeEncode's answer.
   */
  async afterEncode(o: ImageResidencyOptions, samplingWorkingBytes: number, start: { uploadedBefore: number }, blocks?: BlockStream): Promise<ImageResidencyReport> {
    const want = o.textResidency ?? 'auto';
    const budgetBytes = budgetOf(o, this.e);
    const state = blocks?.state ?? null;
    const base = {
      blocks: state ? 'streamed' as const : 'resident' as const, blockHostBytes: state?.hostBytes ?? 0, samplingHostToGpuBytes: 0, steps: 0,
      budgetBytes, weightBytes: this.weightBytes, textEncoderBytes: this.textEncoderBytes, samplingWorkingBytes,
    };
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
