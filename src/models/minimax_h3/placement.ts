// Where a loaded MiniMax H3 model's DiT sits (pipeline.ts): its blocks placed as it loads for the job it loads for, the
// placement settled once the whole DiT is in, moved for a later job of another size (placeForJob), and the other DiT
// partition swapped in for a job that needs it (swapPartition). The decisions themselves are residency.ts's.
import type { Engine } from '../../engine/engine';
import type { LatentProjection } from '../common/latent-preview';
import type { ComputeDType } from '../common/weights';
import type { TextTokenizer } from '../tokenizer';
import type { H3Dirs, H3PipelineOptions } from './pipeline-options';
import { blockPlacement, blocksStreamed, placeBlocks } from './residency';
import type { Geometry } from './sequence/packed-sequence';
import { jobGeometry, type H3Task } from './task';
import type { H3BlockPlacement, MiniMaxH3Transformer } from './transformer/transformer';
import type { AudioVaeDecoder } from './vae/audio';
import type { VideoVaeDecoder } from './vae/video';
import type { H3Partition } from './variants';

/** A loaded model: what every stage of a job takes (stages.ts). */
export interface H3Loaded {
  e: Engine;
  dirs: H3Dirs;
  dtype: ComputeDType;
  tokenizer: TextTokenizer;
  transformer: MiniMaxH3Transformer;
  /** Which DiT partition `transformer` is: FL2VA (text, keyframes, tracks) or Ref2VA (references). */
  partition: H3Partition;
  videoVae: VideoVaeDecoder;
  audioVae: AudioVaeDecoder;
  /** GPU bytes held once loaded; weightBytes: with every DiT block resident (what the residency policy weighs). */
  bytes: number;
  weightBytes: number;
  /** GPU bytes of the two VAEs (a partition swap keeps them). */
  vaeBytes: number;
  /** Previews' latent-to-RGB projection, once fitted against videoVae. */
  projection?: Promise<LatentProjection>;
}

/** A task's packed-sequence geometry for the residency policy; null without a task, or for sizes jobGeometry refuses
 * (the run names them). */
export function geometryOf(task: H3Task | undefined, patchSize: readonly [number, number, number]): Geometry | null {
  if (!task) return null;
  try {
    return jobGeometry(task.frames, task.height, task.width, patchSize);
  } catch {
    return null;
  }
}

/** The DiT partition a task runs on: Ref2VA for reference pictures, else FL2VA. */
export function partitionOf(task: H3Task): H3Partition {
  return task.images.length > 0 && task.imageMode === 'reference' ? 'ref2va' : 'fl2va';
}

/** Where a DiT being loaded puts its blocks: decided against the budget with the job it loads for (load's `next`),
 * or without a job's working set when there is none (residency.ts blockPlacement). `before`: bytes in use before the
 * load's first weight. */
export function loadPlacement(o: H3PipelineOptions, e: Engine, dtype: ComputeDType, before: number, next: H3Task | undefined): H3BlockPlacement {
  return blockPlacement(o, e, dtype, () => e.pool.stats().inUseBytes - before, (c) => geometryOf(next, c.patchSize));
}

/** A DiT just loaded (holding `bytes` with what loaded before it, the VAEs) placed by the job's own rule (residency.ts
 * blocksStreamed, on the whole load's bytes): the load's placement was decided at its first block, before the DiT's
 * last weights (norm_out, proj_out) were read, so at the budget's edge it may differ; corrected here, in the load, so
 * a job finds the placement a later prepare() would give it. Returns the weights' bytes with every block resident. */
export async function settleBlocks(o: H3PipelineOptions, e: Engine, dtype: ComputeDType, transformer: MiniMaxH3Transformer, bytes: number, next: H3Task | undefined): Promise<number> {
  const weightBytes = bytes + (transformer.blockOffload?.gpuBytes ?? 0);
  const geo = geometryOf(next, transformer.config.patchSize);
  if (geo) await placeBlocks(o, { e, dtype, transformer, weightBytes }, geo);
  return weightBytes;
}

/** A loaded DiT's blocks re-placed for the coming job: a job that fits with them resident after one that streamed
 * them gets them back on the GPU, a bigger one sends them to host memory (the copy kept), before any of the job's own
 * memory is taken. Returns the model with the bytes it now holds, or null when nothing has to move (`moving` is called
 * first when something does: stage 加载模型). */
export async function placeForJob(o: H3PipelineOptions, m: H3Loaded, next: H3Task, moving: () => void): Promise<H3Loaded | null> {
  const geo = geometryOf(next, m.transformer.config.patchSize);
  // a job on the other partition loads that one placed for it (swapPartition): nothing to move here
  if (!geo || partitionOf(next) !== m.partition || (m.transformer.blockOffload !== null) === blocksStreamed(o, m, geo)) return null;
  moving();
  await placeBlocks(o, m, geo);
  return { ...m, bytes: m.weightBytes - (m.transformer.blockOffload?.gpuBytes ?? 0) };
}

/** The other partition swapped in: a reference job loads the Ref2VA DiT in place of the FL2VA one (only one is held:
 * at the real size each is the whole transformer), and the next other job swaps back. The old DiT is freed first and
 * `freed` told (the caller forgets the model, so a failed load leaves nothing half-held); the VAEs stay. */
export async function swapPartition(o: H3PipelineOptions, m: H3Loaded, partition: H3Partition, next: H3Task, freed: () => void): Promise<H3Loaded> {
  m.transformer.free();
  // the VAEs stay: the bytes held count from before them
  const before = m.e.pool.stats().inUseBytes - m.vaeBytes;
  freed();
  const transformer = await o.loadTransformer(m.e, m.dirs, { dtype: m.dtype, partition, blocks: loadPlacement(o, m.e, m.dtype, before, next) });
  const weightBytes = await settleBlocks(o, m.e, m.dtype, transformer, m.e.pool.stats().inUseBytes - before, next);
  const bytes = m.e.pool.stats().inUseBytes - before;
  return { ...m, transformer, partition, bytes, weightBytes };
}
