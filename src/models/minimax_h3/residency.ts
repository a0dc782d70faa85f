// The residency policy of a MiniMax H3 job (pipeline.ts): what of the DiT and the text encoder stays on the GPU under
// the memory budget. Decided from the budget: the DiT's blocks already when the DiT loads (a DiT that would not fit
// loads each block straight to host memory: transformer.ts H3LoadOptions.blocks), then per job before the text encoder
// loads (the blocks streamed or resident for this job's size, the rest of the DiT on the host while the text encoder
// runs or not, the encoder's layers resident or streamed). docs/performance.md "Video under a budget".
import type { Engine } from '../../engine/engine';
import type { ComputeDType } from '../common/weights';
import type { H3TextEncoderHost } from './text-encoder/encoder';
import type { H3Config } from './transformer/config';
import type { H3BlockPlacement, MiniMaxH3Transformer } from './transformer/transformer';
import type { Geometry } from './sequence/packed-sequence';

/** Where the DiT's weights are while the text encoder is on the GPU: 'resident' (the GPU, beside it), or 'host' (read
 * back to host memory before the encoder loads, uploaded again once it is freed). 'auto' (the default): 'host' when the
 * resident weights plus the encoder's would exceed the memory budget. */
export type H3TextResidency = 'auto' | 'resident' | 'host';

/** Block offload of the DiT: 'auto' (the default) streams the blocks when the DiT's weights (all resident) plus the
 * sampling's working set (estimated: SAMPLING_ROW_ELEMENTS per sequence row and hidden unit, plus
 * SAMPLING_FIXED_BYTES) would exceed the budget. Blocks that cannot be resident at all load straight to host memory. */
export type H3BlockOffload = 'auto' | 'off' | 'on';

/** The text encoder's decoder layers during the encoding: 'resident' (all on the GPU), 'streamed' (held in host memory
 * and uploaded in turn, two on the GPU at a time). 'auto' (the default): streamed when the whole encoder does not fit
 * beside what stays on the GPU, even with the DiT on the host. */
export type H3TextLayers = 'auto' | 'resident' | 'streamed';

/** The policy's inputs among the pipeline's options (H3PipelineOptions). */
export interface H3ResidencyOptions {
  /** GPU bytes a job may hold, for the residency policy (default: the engine's pool budget, GPU_MEMORY_BUDGET). */
  memoryBudgetBytes?: number;
  /** Whether the DiT's blocks stream from host memory during sampling (default 'auto'; tests force 'on'). */
  blockOffload?: H3BlockOffload;
  /** Where the DiT waits during the text encoding (default 'auto'; tests force 'host'). */
  textResidency?: H3TextResidency;
  /** Text encoder linears as int8 (the int8 profiles). */
  textEncoderInt8?: boolean;
  /** The text encoder's layers resident or streamed (default 'auto'; tests force 'streamed'). */
  textLayers?: H3TextLayers;
}

/** Sampling's working set per packed row and hidden unit, in compute-dtype elements, and a fixed part: the plans at
 * the released sizes (docs/performance.md) hold about 8.6 a row-unit plus 0.4 GiB (768p 10 s: 6.45 GiB over 73,514
 * rows of 5120; 480p 5 s: 1.69 GiB), so these err high. */
const SAMPLING_ROW_ELEMENTS = 10;
const SAMPLING_FIXED_BYTES = 2 ** 29;

/** What a job did about GPU memory (H3PipelineOptions.onResidency; a plan reports it). */
export interface H3ResidencyReport {
  /** The DiT's transformer blocks during sampling: resident, or streamed from host memory block by block. */
  blocks: 'resident' | 'streamed';
  /** Streamed: the blocks' bytes in host memory, and what one forward (each sampling step's) uploads. */
  blockHostBytes: number;
  /** The sampling's working set the block decision assumed (resident weights aside). */
  samplingWorkingBytes: number;
  /** Host-to-GPU bytes the sampling stage uploaded for the blocks (forwards and AdaLN table builds). */
  samplingHostToGpuBytes: number;
  /** Forwards the sampling ran (its steps; a step cache skips some). */
  forwards: number;
  /** The DiT's weights during the text encoding. */
  dit: 'resident' | 'host';
  /** Why: forced by the options, or the figures compared. */
  reason: string;
  budgetBytes: number;
  /** Bytes in use before the encoder loaded (the DiT and the VAEs) and the encoder's own (pool size classes). */
  residentBytes: number;
  textEncoderBytes: number;
  /** Host-to-GPU bytes this cost the job (the DiT uploaded again), and GPU-to-host (read back). */
  hostToGpuBytes: number;
  gpuToHostBytes: number;
  /** The text encoder's decoder layers while encoding, the GPU bytes they hold streamed (two layers), and what the
   * encoding uploaded for them (every layer once a job). */
  textLayers: 'resident' | 'streamed';
  textEncoderStreamedBytes: number;
  textEncoderHostToGpuBytes: number;
}

/** The rows of a job's packed sequence the estimate counts (video patches, both audio channels, 512 of text). */
function sequenceRows(c: H3Config, geo: Geometry): number {
  return geo.numLatentFrames * (geo.latentHeight / c.patchSize[1]) * (geo.latentWidth / c.patchSize[2]) + 2 * geo.numAudioLatents + 512;
}

/** The sampling's working set the block decision assumes for a job (null: before any job, the fixed part alone). */
export function samplingWorkingBytes(c: H3Config, geo: Geometry | null, dtype: ComputeDType): number {
  return (geo ? SAMPLING_ROW_ELEMENTS * sequenceRows(c, geo) * c.hiddenSize * (dtype === 'f16' ? 2 : 4) : 0) + SAMPLING_FIXED_BYTES;
}

/** Whether the blocks stream: forced, or the DiT's weights all resident (`weightBytes`, with the VAEs') plus the
 * sampling's working set exceed the budget. */
function streams(want: H3BlockOffload, weightBytes: number, working: number, budgetBytes: number): boolean {
  return want === 'auto' ? weightBytes + working > budgetBytes : want === 'on';
}

/**
 * The load's block placement (transformer.ts H3LoadOptions.blocks): decided once the first block is on the GPU, from
 * what the load holds so far (`heldBytes()`: the VAEs, the DiT's first weights and that block) and the remaining blocks
 * at its size, against the working set of the job it loads for (`geo`: Pipeline.load's `next`, which the worker's
 * runner and a plan give). Without a job (`geo` null) only the fixed part counts: the blocks load to the host when the
 * DiT cannot be resident at all. A loaded DiT is re-placed for each later job (blocksStreamed, pipeline.ts placeFor):
 * moved to host memory for a bigger one (the copy kept, transformer.ts offloadBlocks), back for a smaller one.
 */
export function blockPlacement(o: H3ResidencyOptions, e: Engine, dtype: ComputeDType, heldBytes: () => number, geo: (c: H3Config) => Geometry | null): H3BlockPlacement {
  return ({ blockBytes, blocks, config }) => {
    const budgetBytes = o.memoryBudgetBytes ?? e.pool.stats().budgetBytes;
    const weightBytes = heldBytes() + blockBytes * (blocks - 1);
    return streams(o.blockOffload ?? 'auto', weightBytes, samplingWorkingBytes(config, geo(config), dtype), budgetBytes) ? 'host' : 'gpu';
  };
}

/** What the loaded model gives the policy. */
export interface ResidencyModel {
  e: Engine;
  dtype: ComputeDType;
  textEncoderDir: string;
  transformer: MiniMaxH3Transformer;
  /** GPU bytes of the loaded weights with every block resident (the DiT's and the VAEs'). */
  weightBytes: number;
}

/** Whether a job of `geo` runs with the loaded DiT's blocks streamed: forced, or its weights all resident
 * (`m.weightBytes`) plus the job's working set exceed the budget (the load's rule, blockPlacement, for a loaded DiT). */
export function blocksStreamed(o: H3ResidencyOptions, m: Pick<ResidencyModel, 'e' | 'dtype' | 'transformer' | 'weightBytes'>, geo: Geometry): boolean {
  const budgetBytes = o.memoryBudgetBytes ?? m.e.pool.stats().budgetBytes;
  return streams(o.blockOffload ?? 'auto', m.weightBytes, samplingWorkingBytes(m.transformer.config, geo, m.dtype), budgetBytes);
}

/** The loaded DiT's blocks placed for a job of `geo` (blocksStreamed): to host memory or back onto the GPU where they
 * are not yet; true when anything moved. */
export async function placeBlocks(o: H3ResidencyOptions, m: Pick<ResidencyModel, 'e' | 'dtype' | 'transformer' | 'weightBytes'>, geo: Geometry): Promise<boolean> {
  const stream = blocksStreamed(o, m, geo);
  if (stream === (m.transformer.blockOffload !== null)) return false;
  if (stream) await m.transformer.offloadBlocks();
  else m.transformer.residentBlocks();
  return true;
}

/**
 * The policy's decisions for one job (before the text encoder loads): the blocks first (placeBlocks: where the load
 * for this job (Pipeline.load's `next`) did not place them already), then where the rest of the DiT waits during the
 * text encoding.
 */
export async function decideResidency(o: H3ResidencyOptions, m: ResidencyModel, geo: Geometry, textEncoder: H3TextEncoderHost): Promise<H3ResidencyReport> {
  const want = o.textResidency ?? 'auto';
  const budgetBytes = o.memoryBudgetBytes ?? m.e.pool.stats().budgetBytes;
  const working = samplingWorkingBytes(m.transformer.config, geo, m.dtype);
  await placeBlocks(o, m, geo);
  const stream = m.transformer.blockOffload !== null;
  const blockHostBytes = m.transformer.blockOffload?.hostBytes ?? 0;
  const residentBytes = m.e.pool.stats().inUseBytes;
  const te = { dtype: m.dtype, int8: o.textEncoderInt8 };
  const textEncoderBytes = await textEncoder.gpuBytes(m.e, m.textEncoderDir, te);
  const textEncoderStreamedBytes = await textEncoder.streamedGpuBytes(m.e, m.textEncoderDir, te);
  // the DiT's weights still on the GPU (streamed blocks are not): what 'host' takes off it while encoding
  const ditBytes = [...new Set(m.transformer.weightTensors().filter((t) => !t.storage.onHost).map((t) => t.storage))].reduce((a, s) => a + s.pooled.size, 0);
  const fits = (dit: 'resident' | 'host', layers: 'resident' | 'streamed') =>
    residentBytes - (dit === 'host' ? ditBytes : 0) + (layers === 'resident' ? textEncoderBytes : textEncoderStreamedBytes) <= budgetBytes;
  const wantLayers = o.textLayers ?? 'auto';
  // cheapest first: nothing moved; the DiT's rest moved (its bytes once a job); the layers streamed (the encoder's
  // bytes once a job); both
  const order: ['resident' | 'host', 'resident' | 'streamed'][] = [['resident', 'resident'], ['host', 'resident'], ['resident', 'streamed'], ['host', 'streamed']];
  const allowed = order.filter(([d, l]) => (want === 'auto' || d === want) && (wantLayers === 'auto' || l === wantLayers));
  const [dit, textLayers] = allowed.find(([d, l]) => fits(d, l)) ?? allowed[allowed.length - 1]!;
  const forced = [want !== 'auto' ? `forced (${want})` : '', wantLayers !== 'auto' ? `text encoder layers forced (${wantLayers})` : ''].filter(Boolean).join(', ');
  const reason = forced || (dit === 'resident' && textLayers === 'resident' ? 'the resident weights and the text encoder fit the budget together'
    : textLayers === 'resident' ? 'the resident weights and the text encoder together exceed the budget'
    : 'the whole text encoder does not fit beside what stays on the GPU: its layers are streamed');
  return {
    blocks: stream ? 'streamed' : 'resident', blockHostBytes, samplingWorkingBytes: working, samplingHostToGpuBytes: 0, forwards: 0,
    dit, reason, budgetBytes, residentBytes, textEncoderBytes, hostToGpuBytes: 0, gpuToHostBytes: 0,
    textLayers, textEncoderStreamedBytes, textEncoderHostToGpuBytes: 0,
  };
}
