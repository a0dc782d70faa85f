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
import { throwIfCancelled } from '../../common/errors';
import type { Engine } from '../../engine/engine';
import type { Tensor } from '../../engine/tensor';
import { STAGE } from '../../catalog';
import { copyInto } from '../../engine/ops/layout';
import { commitFile, removeQuietly, tempSibling } from '../../media/files';
import { openVideoWriter, type VideoWriter } from '../../media/video-writer';
import { oneOff, ResidentPipeline, type RunContext } from '../common/pipeline';
import type { LoraTarget } from '../common/lora-linear';
import { h3LoraNames, h3LoraWeights } from '../common/lora-models';
import { denoisedPreview, type LatentProjection } from '../common/latent-preview';
import { fitH3Projection, h3PreviewFrames } from './preview';
import { defaultComputeDType, type ComputeDType } from '../common/weights';
import { TextTokenizer } from '../tokenizer';
import type { AudioVaeDecoder } from './vae/audio';
import { conditionRows, type HostLatents } from './conditioning/condition-rows';
import { encodeKeyframes, readKeyframes } from './conditioning/keyframe-inputs';
import { encodePromptRows } from './text-encoder/encode-prompt';
import { channelsFromRows, uploadInitialRows } from './sampler/initial-rows';
import { audioReferenceCount, encodeAudioInputs, readAudioInputs, soundtrackIsReference, withSpeech, type EncodedAudioInputs } from './conditioning/audio';
import { buildKeyframeSequence, buildTrackSequence } from './sequence/keyframes';
import { unpatchify } from './transformer/patchify';
import { sampleH3 } from './sampler/sampler';
import { h3Noise, keyframeNoises } from './sampler/noise';
import { h3StepPlan } from './sampler/sigmas';
import { H3TextEncoderHost } from './text-encoder/encoder';
import type { MiniMaxH3Transformer } from './transformer/transformer';
import { checkInputs, jobGeometry, type H3Task } from './task';
import { voiceBlocks } from './conditioning/voice-inputs';
import { loadAudioVae, loadVideoVae } from './vae/loaders';
import type { H3Partition } from './variants';
import { readReferences, referenceBlocks } from './conditioning/reference-inputs';
import { buildReferenceSequence } from './sequence/references';
import { referencePrompt } from '../../catalog';
import type { VideoLatents, VideoVaeDecoder } from './vae/video';
import { HostHeld, releaseToHost } from '../../engine/host-held';
import type { H3BlockPlacement } from './transformer/transformer';
import { blockPlacement, blocksStreamed, decideResidency, placeBlocks } from './residency';
import type { Geometry } from './sequence/packed-sequence';
import type { H3Dirs, H3PipelineOptions } from './pipeline-options';

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

interface Loaded {
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

/** The 'video' pipeline of one profile (the GPU worker serves the six: src/worker/profiles/video.ts). */
export class MiniMaxH3Pipeline extends ResidentPipeline<H3Task, Loaded> {
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

  protected async loadModel(ctx: RunContext, next?: H3Task): Promise<Loaded> {
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
      const transformer = await this.o.loadTransformer(e, dirs, { dtype, partition: 'fl2va', blocks: this.placement(e, dtype, before, next) });
      owned.push(transformer);
      throwIfCancelled(ctx.signal);
      const weightBytes = await this.settle(e, dtype, transformer, e.pool.stats().inUseBytes - before, next);
      const bytes = e.pool.stats().inUseBytes - before;
      return { e, dirs, dtype, tokenizer, transformer, partition: 'fl2va', videoVae, audioVae, vaeBytes, bytes, weightBytes };
    } catch (err) {
      for (const p of owned.reverse()) p.free();
      throw err;
    }
  }

  /** Where a DiT being loaded puts its blocks: decided against the budget with the job it loads for (load's `next`),
   * or without a job's working set when there is none (residency.ts blockPlacement). */
  private placement(e: Engine, dtype: ComputeDType, before: number, next: H3Task | undefined): H3BlockPlacement {
    return blockPlacement(this.o, e, dtype, () => e.pool.stats().inUseBytes - before, (c) => geometryOf(next, c.patchSize));
  }

  /** A DiT just loaded (holding `bytes` with what loaded before it, the VAEs) placed by the job's own rule (residency.ts
   * blocksStreamed, on the whole load's bytes): the load's placement was decided at its first block, before the DiT's
   * last weights (norm_out, proj_out) were read, so at the budget's edge it may differ; corrected here, in the load, so
   * a job finds the placement a later prepare() would give it. Returns the weights' bytes with every block resident. */
  private async settle(e: Engine, dtype: ComputeDType, transformer: MiniMaxH3Transformer, bytes: number, next: H3Task | undefined): Promise<number> {
    const weightBytes = bytes + (transformer.blockOffload?.gpuBytes ?? 0);
    const geo = geometryOf(next, transformer.config.patchSize);
    if (geo) await placeBlocks(this.o, { e, dtype, transformer, weightBytes }, geo);
    return weightBytes;
  }

  /** A loaded DiT's blocks re-placed for the coming job (load with a task, or run): a job that fits with them resident
   * after one that streamed them gets them back on the GPU, a bigger one sends them to host memory (the copy kept),
   * before any of the job's own memory is taken. Stage 加载模型 when they move; the bytes held are told (onLoaded). */
  protected override async placeFor(m: Loaded, next: H3Task, ctx: RunContext): Promise<void> {
    const geo = geometryOf(next, m.transformer.config.patchSize);
    // a job on the other partition loads that one placed for it (usePartition): nothing to move here
    if (!geo || partitionOf(next) !== m.partition || (m.transformer.blockOffload !== null) === blocksStreamed(this.o, m, geo)) return;
    ctx.stage(STAGE.loadModel);
    await placeBlocks(this.o, m, geo);
    const bytes = m.weightBytes - (m.transformer.blockOffload?.gpuBytes ?? 0);
    this.m = { ...m, bytes };
    this.o.onLoaded?.(bytes, m.dirs);
    this.trace(m.transformer.blockOffload ? 'blocks to host' : 'blocks resident');
  }

  protected override afterLoad(m: Loaded): void {
    this.o.onLoaded?.(m.bytes, m.dirs);
    this.trace('loaded');
  }

  /** The partition a job needs loaded: a reference job swaps the Ref2VA DiT in place of the FL2VA one (only one is
   * held: at the real size each is the whole transformer), and the next other job swaps back. */
  private async usePartition(partition: H3Partition, ctx: RunContext, next: H3Task): Promise<void> {
    const m = this.m!;
    if (m.partition === partition) return;
    ctx.stage(STAGE.loadModel);
    m.transformer.free();
    // the VAEs stay: the bytes held count from before them
    const before = m.e.pool.stats().inUseBytes - m.vaeBytes;
    this.m = null; // a failed load leaves nothing half-held: the next job loads again
    const transformer = await this.o.loadTransformer(m.e, m.dirs, { dtype: m.dtype, partition, blocks: this.placement(m.e, m.dtype, before, next) });
    const weightBytes = await this.settle(m.e, m.dtype, transformer, m.e.pool.stats().inUseBytes - before, next);
    const bytes = m.e.pool.stats().inUseBytes - before;
    this.m = { ...m, transformer, partition, bytes, weightBytes };
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
    const count = task.images.length;
    const reference = count > 0 && task.imageMode === 'reference';
    await this.loaded(ctx, task);
    checkInputs(task);
    await this.usePartition(partitionOf(task), ctx, task);
    const m = this.m!;
    const { e, transformer } = m;
    const audioRefs = audioReferenceCount(task);
    const copied = soundtrackIsReference(task);
    // a reference job's prompt names its pictures <Picture n> and voices or soundtrack <Audio n> (prefixed where it
    // does not: catalog referencePrompt)
    const prompt = reference ? referencePrompt(task.prompt, count, copied ? 0 : audioRefs, copied) : task.prompt;
    const { width, height } = task;
    const geo = jobGeometry(task.frames, height, width, transformer.config.patchSize);
    const patch = transformer.config.patchSize;

    // text: load the encoder, encode, free it before anything of the sampling is allocated
    ctx.stage(STAGE.loadTextEncoder);
    // keyframes onto the frame first: the text encoder may see them (keyframe-text.ts)
    // references on their own canvases instead (reference-inputs.ts); the video does not start on them
    const pictures = !count ? [] : reference ? await readReferences(task.images, { width, height }, ctx.signal, this.o.referenceCanvas) : await readKeyframes(task.images, width, height, ctx.signal);
    // the soundtrack and voices read before any model loads too: a file that is not audio fails here (conditioning/audio.ts)
    let audio = await readAudioInputs(task, ctx.signal);
    const residency = await decideResidency(this.o, { e, dtype: m.dtype, textEncoderDir: m.dirs.textEncoder, transformer, weightBytes: m.weightBytes }, geo, this.textEncoderHost);
    // the DiT's weights on the host from before the encoder loads until it is freed ('host' only)
    const dit: { held: HostHeld | null } = { held: null };
    let encoded: Awaited<ReturnType<typeof encodePromptRows>>;
    const uploaded = this.textEncoderHost.streamedUploadBytes;
    try {
      encoded = await encodePromptRows(e, {
        textEncoderDir: m.dirs.textEncoder, tokenizer: m.tokenizer, host: this.textEncoderHost, transformer, prompt, pictures, pictureRole: reference ? 'reference' : 'keyframe', voices: audioRefs,
        dtype: m.dtype, int8: this.o.textEncoderInt8, streamLayers: residency.textLayers === 'streamed', onText: this.o.onText, trace: (ev) => this.trace(ev),
        beforeLoad: residency.dit === 'host' ? async () => {
          // what is still on the GPU: streamed blocks are on the host already
          dit.held = await releaseToHost(e, transformer.weightTensors().filter((t) => !t.storage.onHost));
          residency.gpuToHostBytes = dit.held.bytes;
          this.trace('transformer on the host');
        } : undefined,
        afterFree: () => {
          if (!dit.held?.onHost) return;
          dit.held.restore();
          residency.hostToGpuBytes = dit.held.bytes;
          this.trace('transformer back');
        },
      }, ctx);
    } finally {
      // a failed encoding leaves the DiT on the GPU as it found it
      if (dit.held?.onHost) dit.held.restore();
    }
    const { text, textTags } = encoded;
    residency.textEncoderHostToGpuBytes = this.textEncoderHost.streamedUploadBytes - uploaded;

    // keyframes: the VAE encoder (its own load, freed before sampling)
    let latents: HostLatents[] = [];
    let audioRows: EncodedAudioInputs = { rows: new Float32Array(0), encoded: [] };
    try {
      if (task.speech) {
        // the speech model loads and is freed here, still in 编码提示词/图片 (the text encoder is already freed)
        this.trace('speech');
        const spoken = await task.speech(ctx);
        this.trace('speech made');
        throwIfCancelled(ctx.signal);
        audio = await withSpeech(task, spoken, ctx.signal);
      }
      if (count) {
        latents = await encodeKeyframes(e, m.dirs.vae, pictures, { tiling: this.o.tiling, signal: ctx.signal });
        this.trace(reference ? 'references encoded' : 'keyframes encoded');
      }
      // the leading audio rows, clean (t = 1.0): a track's guide (FL2VA), or the audio references (Ref2VA)
      audioRows = await encodeAudioInputs(e, m.dirs.audioVae, audio, geo.numAudioLatents, ctx.signal);
      if (audioRows.rows.length) this.trace(audio.voices.length ? 'audio references encoded' : 'track encoded');
    } catch (err) {
      text.free();
      throw err;
    }

    const { track, voices } = audio;
    const trackRows = audioRows.rows;
    const tmp = tempSibling(task.outputPath);
    let writer: VideoWriter | null = null;
    const live: Tensor[] = [text];
    const drop = (t: Tensor) => {
      live.splice(live.indexOf(t), 1);
      t.free();
    };
    try {
      throwIfCancelled(ctx.signal);
      ctx.stage(STAGE.sample);
      const layout = {
        textTags,
        numLatentFrames: geo.numLatentFrames,
        latentHeight: geo.latentHeight,
        latentWidth: geo.latentWidth,
        numAudioLatents: geo.numAudioLatents,
        patchSize: patch,
        audioChannels: 2,
      };
      const packed = reference
        ? buildReferenceSequence({ ...layout, references: [...referenceBlocks(latents), ...voiceBlocks(audioRows.encoded)] })
        : track ? buildTrackSequence(layout, count, geo.numAudioLatents) : buildKeyframeSequence(layout, count);
      const seq = transformer.prepare(packed);
      const C = transformer.config.inChannels;
      const A = transformer.config.audioInChannels;
      const nc = packed.numConditionVideoRows;
      const nca = packed.numConditionAudioRows;
      const rows = count ? conditionRows(latents, keyframeNoises(task.seed, latents), patch) : new Float32Array(0);
      const { video, audio } = uploadInitialRows(e, {
        geo, patch, channels: C, audioChannels: A, nc, nca, keyframeRows: rows, trackRows,
        noise: this.o.noise ? this.o.noise(geo, C, A) : h3Noise(task.seed, geo, C, A),
      });
      live.push(video, audio);
      const rowWidth = video.shape[1]!;
      const nv = video.shape[0]! - nc;
      const plan = h3StepPlan(transformer.stepCount, task.steps);
      ctx.progress(plan.progressOffset, task.steps);
      this.trace('sampling');
      const uploadedBefore = transformer.blockOffload?.uploadedBytes ?? 0;
      try {
        const sampled = await sampleH3(e, transformer, seq, text, video, audio, {
          videoShift: transformer.videoShift, // the Ref2VA adapters' own (variants.ts H3ReferenceRun)
          ...this.o.sampler,
          steps: plan.gridPoints,
          sigmas: this.o.sigmas?.(plan.gridPoints),
          denoised: denoisedPreview(ctx, task.steps, async (x0) => h3PreviewFrames(e, x0, { channels: C, dims: [geo.numLatentFrames, geo.latentHeight, geo.latentWidth], patch }, await (m.projection ??= oneOff(ctx, () => fitH3Projection(m.videoVae, C)))), plan.progressOffset),
          onStep: async (done) => {
            // the step's GPU work done before it counts (the forwards are only recorded until then), and the event
            // loop turned once, so a DELETE that arrived meanwhile is seen at the check below
            await e.sync();
            ctx.progress(plan.progressOffset + done, task.steps);
            this.trace(`step ${plan.progressOffset + done}/${task.steps}`);
            throwIfCancelled(ctx.signal);
            await ctx.safePoint();
            throwIfCancelled(ctx.signal);
          },
        });
        residency.forwards = sampled.forwards;
        residency.samplingHostToGpuBytes = (transformer.blockOffload?.uploadedBytes ?? 0) - uploadedBefore;
        this.o.onResidency?.(residency);
      } finally {
        seq.free();
      }
      drop(text);
      const audioRead = await e.read(audio);
      const audioHost = channelsFromRows(audioRead.subarray(nca * A), 2, A, geo.numAudioLatents);
      drop(audio);
      if (track && !voices.length) this.o.onTrack?.({ track, rows: trackRows, after: audioRead.slice(0, nca * A) });
      if (voices.length) this.o.onVoices?.({ voices, encoded: audioRows.encoded, rows: trackRows, after: audioRead.slice(0, nca * A), track });
      if (nc && (reference ? this.o.onReferences : this.o.onKeyframes)) {
        const after = (await e.read(video)).slice(0, nc * rowWidth);
        if (reference) this.o.onReferences!({ pictures, latents, rows, after, prompt });
        else this.o.onKeyframes!({ pictures, latents, rows, after });
      }
      // the conditioning rows are dropped (never decoded); a fresh tensor for the generated ones
      let generated = video;
      if (nc) {
        generated = e.empty([nv, rowWidth], 'f32', 'h3 generated rows');
        live.push(generated);
        copyInto(e, video.slice(0, nc, nc + nv), generated);
        drop(video);
      }
      const sampled = unpatchify(e, generated, C, [geo.numLatentFrames, geo.latentHeight, geo.latentWidth], patch);
      drop(generated);
      const videoHost: VideoLatents = { data: await e.read(sampled), shape: [C, geo.numLatentFrames, geo.latentHeight, geo.latentWidth] };
      sampled.free();
      this.o.onSampled?.(videoHost, { data: audioHost, shape: [2, A, geo.numAudioLatents] });
      throwIfCancelled(ctx.signal);

      ctx.stage(STAGE.videoDecode);
      this.trace('video decoding');
      const out = m.videoVae.outputShape(videoHost.shape);
      if (out.frames !== task.frames || out.width !== width || out.height !== height) {
        throw new Error(`MiniMax H3: the video VAE decodes ${out.frames} frames of ${out.width}x${out.height}, the task wants ${task.frames} of ${width}x${height}`);
      }
      writer = await openVideoWriter({ path: tmp, width, height, frames: task.frames, floatRange: 'unit', signal: ctx.signal });
      let n = 0;
      ctx.progress(0, task.frames);
      for await (const frame of m.videoVae.frames(videoHost, { tiling: this.o.tiling })) {
        this.o.onFrame?.(frame, n);
        await writer.writeFrame(frame);
        ctx.progress(++n, task.frames);
        throwIfCancelled(ctx.signal);
      }

      ctx.stage(STAGE.audioDecode);
      this.trace('audio decoding');
      // a track job's soundtrack is its clip, unchanged: the generated audio is not decoded
      const sound = track
        ? { channels: track.channels, sampleRate: track.sampleRate, samples: track.channels[0].length }
        : await m.audioVae.decode(e, audioHost, [2, A, geo.numAudioLatents]);
      if (!track) this.o.onAudio?.(sound.channels, sound.sampleRate);
      throwIfCancelled(ctx.signal);
      const planar = new Float32Array(sound.samples * 2);
      sound.channels.forEach((c, i) => planar.set(c, i * sound.samples));

      ctx.stage(STAGE.package);
      await writer.close({ data: planar, sampleRate: sound.sampleRate, channels: 2, layout: 'planar' });
      writer = null;
      throwIfCancelled(ctx.signal);
      ctx.stage(STAGE.save);
      await commitFile(tmp, task.outputPath);
      this.trace('saved');
    } finally {
      for (const t of live) t.free();
      if (writer) await writer.abort();
      await removeQuietly(tmp);
    }
  }

  override async unload(): Promise<void> {
    this.textEncoderHost.drop();
    await super.unload();
  }

  protected freeModel(m: Loaded): void {
    m.audioVae.free();
    m.videoVae.free();
    m.transformer.free();
  }
}

/** A task's packed-sequence geometry for the residency policy; null without a task, or for sizes jobGeometry refuses
 * (the run names them). */
function geometryOf(task: H3Task | undefined, patchSize: readonly [number, number, number]): Geometry | null {
  if (!task) return null;
  try {
    return jobGeometry(task.frames, task.height, task.width, patchSize);
  } catch {
    return null;
  }
}

/** The DiT partition a task runs on: Ref2VA for reference pictures, else FL2VA. */
function partitionOf(task: H3Task): H3Partition {
  return task.images.length > 0 && task.imageMode === 'reference' ? 'ref2va' : 'fl2va';
}
