// MiniMax H3 text-to-video-with-sound as a service pipeline (diffusers modular_pipelines/minimax_h3, T2VA path;
// docs/models/minimax-h3.md "Pipeline"). One job:
//   load (once per profile)   video VAE, audio VAE, transformer (the profile's loader: adapter merge, int8), tokenizer;
//                              where the DiT would exceed the budget, its blocks load straight to host memory, one at
//                              a time through the GPU (residency.ts blockPlacement)
//   加载文本编码器             the Qwen3-VL text encoder (layers < 50) onto the GPU per job: read and prepared (bf16 ->
//                              dtype, int8 quantised) on the first job only, then uploaded from the host copy
//                              (H3TextEncoderHost) that unload() drops; where the resident weights and the encoder
//                              would exceed the memory budget (textResidency 'auto'), the DiT's weights are read back
//                              to host memory first and uploaded again once the encoder is freed (engine/host-held.ts);
//                              where even the encoder alone does not fit, its layers stay in host memory and are
//                              uploaded in turn while encoding (textLayers, residency.ts)
//   编码提示词/图片            prompt verbatim -> hidden_states[50] -> the encoder is FREED -> context_embedder + refiner;
//                              keyframes (mode i2v): each image cover-cropped onto the frame and encoded by the video
//                              VAE encoder, loaded for this and freed (keyframe-inputs.ts) -> one latent frame each;
//                              a track (audio_mode track): the clip at 32 kHz stereo fitted to the video, encoded by the
//                              audio VAE encoder, loaded for this and freed (track-inputs.ts) -> the target's audio latents;
//                              references (image_mode reference): the Ref2VA DiT swapped in (usePartition), each
//                              picture on its own canvas and encoded as a keyframe (reference-inputs.ts), the prompt
//                              with its <Picture n> definitions (catalog referencePrompt), Ref2VA blocks ahead of the
//                              target (references.ts); voices (audio_mode voice, with references): each clip at its own
//                              rate truncated, stereo, resampled to 32 kHz as torchaudio, encoded by the audio VAE
//                              encoder (voice-inputs.ts) into a clean audio block after the pictures, "<Audio j>: " in
//                              the presentation and an <Audio n> definition in the prompt;
//                              a spoken track (tts_text): task.speech() makes the clip first (the worker's speech model,
//                              loaded and freed inside it), then it goes the track's way;
//                              a soundtrack (track or speech) with references: muxed unchanged, and to the model an
//                              <Audio 1> reference prepared as a voice, defined as fully_copy in the prompt (conditioning/audio.ts)
//   采样                       seeded noise: video latents [24, F, h, w] (patchified), audio latents [2, 32, Na]
//                              (rows channel-major); packed sequence [text | keyframes | audio | video] (keyframes.ts:
//                              FL2VA for 1-2 images, guides from 3; a track: guides, the clip's rows at frame 0, clean,
//                              first in the audio rows and never stepped); the keyframe rows 0.999 x0 + 0.001 noise, first
//                              in the video rows and never stepped; dual-schedule Euler (video shift 12, audio shift 3);
//                              progress, cancel and the runner's safe point per step
//   视频解码                   unpatchify -> VideoVaeDecoder.frames() (tiled, chunked) streamed into the H.264 encoder
//   音频解码                   audio rows -> [2, 32, Na] -> AudioVaeDecoder (32 kHz, one batch item per stereo channel);
//                              a track job muxes its prepared clip instead (the generated audio is not decoded)
//   封装                       the writer finishes x264 and muxes AAC into a hidden temp sibling of the output
//   保存                       fsync + rename onto the job's output path
// Frames follow the model grid 17k + 5 (latent frames 5k + 2), audio latents round(frames / 24 * 40) per channel
// (sequence/packed-sequence.ts resolveGeometry). Steps count what the loaded weights were made for (transformer.stepCount, set from the
// profile: sigmas.ts h3StepPlan): the base release's grid points (S steps, S - 1 forwards; 1 step: the grid [1, 0]) or
// the distilled weights' evaluations (N steps, N forwards); either way progress ends at the steps asked for.
// The stages are stages.ts's functions of the loaded model and the job; where the DiT sits, placement.ts's.
import { throwIfCancelled } from '../../common/errors';
import { STAGE } from '../../catalog';
import { ResidentPipeline, type RunContext } from '../common/pipeline';
import type { LoraTarget } from '../common/lora-linear';
import { h3LoraNames, h3LoraWeights } from '../common/lora-models';
import { defaultComputeDType, type ComputeDType } from '../common/weights';
import { TextTokenizer } from '../tokenizer';
import { H3TextEncoderHost } from './text-encoder/encoder';
import { checkInputs, type H3Task } from './task';
import { loadAudioVae, loadVideoVae } from './vae/loaders';
import type { H3Partition } from './variants';
import { loadPlacement, partitionOf, placeForJob, settleBlocks, swapPartition, type H3Loaded } from './placement';
import { decodeOutputs, encodeConditions, h3Job, sampleLatents, type H3StageContext } from './stages';
import type { H3PipelineOptions } from './pipeline-options';

/** The residency policy's types (residency.ts), here for the callers that import them with the pipeline. */
export type { H3BlockOffload, H3ResidencyReport, H3TextResidency } from './residency';

/** The seeded noise of a job (noise.ts), here for the callers that import it with the pipeline. */
export { gaussianNoise, h3Noise, keyframeNoises } from './sampler/noise';
/** The audio row layout (sampler/initial-rows.ts), here for the callers that import it with the pipeline. */
export { audioRows, channelsFromRows } from './sampler/initial-rows';
/** The job's contract (task.ts), here for the callers that import it with the pipeline. */
export { checkInputs, h3TaskOf, jobGeometry, type H3Task } from './task';

/** The pipeline's options and the checkpoint's folders (pipeline-options.ts), here for the callers that import them
 * with the pipeline. */
export { h3DirsFromRoot, type H3Dirs, type H3PipelineOptions, type H3PipelineTrace, type H3TransformerLoader } from './pipeline-options';

/** The 'video' pipeline of one profile (the GPU worker serves the six: src/worker/profiles/video.ts). */
export class MiniMaxH3Pipeline extends ResidentPipeline<H3Task, H3Loaded> {
  /** The text encoder's prepared weights in host memory between jobs (not GPU memory: not in residentBytes). */
  private readonly textEncoderHost = new H3TextEncoderHost();
  constructor(private readonly o: H3PipelineOptions) {
    super();
  }

  /** Host RAM held by the text encoder's copy (0 until the first job, and after unload()). */
  get textEncoderHostBytes(): number {
    return this.textEncoderHost.bytes;
  }

  private trace(event: string): void {
    if (this.o.trace && this.m) this.o.trace(event, { inUseBytes: this.m.e.pool.stats().inUseBytes });
  }

  protected async loadModel(ctx: RunContext, next?: H3Task): Promise<H3Loaded> {
    ctx.stage(STAGE.loadModel);
    const e = await this.o.engine();
    const dirs = await this.o.dirs(e, ctx.signal);
    throwIfCancelled(ctx.signal);
    const dtype: ComputeDType = this.o.dtype ?? defaultComputeDType(e);
    const before = e.pool.stats().inUseBytes;
    const tokenizer = await TextTokenizer.fromDir(dirs.tokenizer);
    const owned: { free(): void }[] = [];
    try {
      // the VAEs first: the DiT's block placement weighs them (residency.ts blockPlacement)
      const videoVae = await loadVideoVae(e, dirs.vae, dtype);
      owned.push(videoVae);
      throwIfCancelled(ctx.signal);
      const audioVae = await loadAudioVae(e, dirs.audioVae);
      owned.push(audioVae);
      throwIfCancelled(ctx.signal);
      const vaeBytes = e.pool.stats().inUseBytes - before;
      const transformer = await this.o.loadTransformer(e, dirs, { dtype, partition: 'fl2va', blocks: loadPlacement(this.o, e, dtype, before, next) });
      owned.push(transformer);
      throwIfCancelled(ctx.signal);
      const weightBytes = await settleBlocks(this.o, e, dtype, transformer, e.pool.stats().inUseBytes - before, next);
      const bytes = e.pool.stats().inUseBytes - before;
      return { e, dirs, dtype, tokenizer, transformer, partition: 'fl2va', videoVae, audioVae, vaeBytes, bytes, weightBytes };
    } catch (err) {
      for (const p of owned.reverse()) p.free();
      throw err;
    }
  }

  /** A loaded DiT's blocks re-placed for the coming job (load with a task, or run: placement.ts placeForJob). Stage
   * 加载模型 when they move; the bytes held are told (onLoaded). */
  protected override async placeFor(m: H3Loaded, next: H3Task, ctx: RunContext): Promise<void> {
    const placed = await placeForJob(this.o, m, next, () => ctx.stage(STAGE.loadModel));
    if (!placed) return;
    this.m = placed;
    this.o.onLoaded?.(placed.bytes, m.dirs);
    this.trace(m.transformer.blockOffload ? 'blocks to host' : 'blocks resident');
  }

  protected override afterLoad(m: H3Loaded): void {
    this.o.onLoaded?.(m.bytes, m.dirs);
    this.trace('loaded');
  }

  /** The partition a job needs loaded (placement.ts swapPartition): a reference job swaps the Ref2VA DiT in place of
   * the FL2VA one, and the next other job swaps back. */
  private async usePartition(partition: H3Partition, ctx: RunContext, next: H3Task): Promise<void> {
    const m = this.m!;
    if (m.partition === partition) return;
    ctx.stage(STAGE.loadModel);
    // a failed load leaves nothing half-held: the next job loads again
    this.m = await swapPartition(this.o, m, partition, next, () => (this.m = null));
    this.o.onLoaded?.(this.m.bytes, m.dirs);
    this.trace(`loaded ${partition}`);
    throwIfCancelled(ctx.signal);
  }

  /** The DiT a job runs on, for its LoRAs (lora-linear.ts withLoras, issue 46): loaded for `task` (its block placement)
   * and its partition swapped in first as run() does (a reference job's Ref2VA), so the terms sit on the weights that
   * run; run() then finds both in place. */
  async loraTarget(ctx: RunContext, task: H3Task): Promise<LoraTarget> {
    await this.loaded(ctx, task);
    await this.usePartition(partitionOf(task), ctx, task);
    const m = this.m!;
    return { e: m.e, weights: h3LoraWeights(m.transformer), dtype: m.dtype, names: h3LoraNames(m.transformer.config) };
  }

  async run(task: H3Task, ctx: RunContext): Promise<void> {
    await this.loaded(ctx, task);
    checkInputs(task);
    await this.usePartition(partitionOf(task), ctx, task);
    const m = this.m!;
    const job = h3Job(task, m);
    const s: H3StageContext = { o: this.o, ctx, trace: (event) => this.trace(event) };
    const conditions = await encodeConditions(m, job, this.textEncoderHost, s);
    const sampled = await sampleLatents(m, job, conditions, s);
    await decodeOutputs(m, job, conditions, sampled, s);
  }

  override async unload(): Promise<void> {
    this.textEncoderHost.drop();
    await super.unload();
  }

  protected freeModel(m: H3Loaded): void {
    m.audioVae.free();
    m.videoVae.free();
    m.transformer.free();
  }
}
