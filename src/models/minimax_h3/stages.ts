// The stages of one MiniMax H3 job (pipeline.ts run(): the pipeline's header names what each does), each a function
// of the loaded model (placement.ts H3Loaded, placed and on the job's partition) and the job:
//   encodeConditions   加载文本编码器 + 编码提示词/图片: the text encoder loaded, run and freed; keyframes or references,
//                      a spoken track, a soundtrack and voices encoded by their VAE encoders -> the text rows (GPU) and
//                      the conditioning latents (host)
//   sampleLatents      采样: the packed sequence, the initial rows, the sampler -> the video and audio latents (host);
//                      every GPU tensor of the job freed, the text rows included
//   decodeOutputs      视频解码 + 音频解码 + 封装 + 保存: the VAE decoders into the mp4 writer, then the file in place
import { throwIfCancelled } from '../../common/errors';
import { referencePrompt, STAGE } from '../../catalog';
import { HostHeld, releaseToHost } from '../../engine/host-held';
import { copyInto } from '../../engine/ops/layout';
import type { Tensor } from '../../engine/tensor';
import { commitFile, removeQuietly, tempSibling } from '../../media/files';
import { openVideoWriter, type VideoWriter } from '../../media/video-writer';
import { denoisedPreview } from '../common/latent-preview';
import { oneOff, type RunContext } from '../common/pipeline';
import type { Rgb8Image } from '../common/pil-resize';
import { audioReferenceCount, encodeAudioInputs, readAudioInputs, soundtrackIsReference, withSpeech, type AudioInputs, type EncodedAudioInputs } from './conditioning/audio';
import { conditionRows, type HostLatents } from './conditioning/condition-rows';
import { encodeKeyframes, readKeyframes } from './conditioning/keyframe-inputs';
import { readReferences, referenceBlocks } from './conditioning/reference-inputs';
import { voiceBlocks } from './conditioning/voice-inputs';
import type { H3PipelineOptions } from './pipeline-options';
import type { H3Loaded } from './placement';
import { fitH3Projection, h3PreviewFrames } from './preview';
import { decideResidency, type H3ResidencyReport } from './residency';
import { channelsFromRows, uploadInitialRows } from './sampler/initial-rows';
import { h3Noise, keyframeNoises } from './sampler/noise';
import { sampleH3 } from './sampler/sampler';
import { h3StepPlan } from './sampler/sigmas';
import type { Geometry } from './sequence/packed-sequence';
import { buildKeyframeSequence, buildTrackSequence } from './sequence/keyframes';
import { buildReferenceSequence } from './sequence/references';
import { jobGeometry, type H3Task } from './task';
import { encodePromptRows } from './text-encoder/encode-prompt';
import type { H3TextEncoderHost } from './text-encoder/encoder';
import { unpatchify } from './transformer/patchify';
import type { VideoLatents } from './vae/video';

/** One job as the stages see it: the task and what follows from it on the loaded DiT. */
export interface H3Job {
  task: H3Task;
  /** Pictures given, and whether they are references (Ref2VA) rather than keyframes. */
  count: number;
  reference: boolean;
  /** Audio references (voices, or a soundtrack given as one), and whether the soundtrack is copied as a reference. */
  audioRefs: number;
  copied: boolean;
  /** The text the model is given: a reference job's prompt names its pictures <Picture n> and voices or soundtrack
   * <Audio n> (prefixed where it does not: catalog referencePrompt). */
  prompt: string;
  geo: Geometry;
  patch: readonly [number, number, number];
}

/** What a stage reports through besides the model and the job: the pipeline's options, the run's context and trace. */
export interface H3StageContext {
  o: H3PipelineOptions;
  ctx: RunContext;
  trace(event: string): void;
}

export function h3Job(task: H3Task, m: H3Loaded): H3Job {
  const count = task.images.length;
  const reference = count > 0 && task.imageMode === 'reference';
  const audioRefs = audioReferenceCount(task);
  const copied = soundtrackIsReference(task);
  const prompt = reference ? referencePrompt(task.prompt, count, copied ? 0 : audioRefs, copied) : task.prompt;
  const patch = m.transformer.config.patchSize;
  return { task, count, reference, audioRefs, copied, prompt, geo: jobGeometry(task.frames, task.height, task.width, patch), patch };
}

/** What the encoding gives the sampling: `text` on the GPU (the sampling frees it), the rest on the host. */
export interface H3Conditions {
  /** The refined text rows and their tags. */
  text: Tensor;
  textTags: Uint8Array;
  /** The pictures as prepared (keyframes on the frame, references on their canvases) and their encoded latents. */
  pictures: Rgb8Image[];
  latents: HostLatents[];
  /** The job's audio inputs (a spoken track made) and their clean leading rows. */
  audio: AudioInputs;
  audioRows: EncodedAudioInputs;
  residency: H3ResidencyReport;
}

/** 加载文本编码器 and 编码提示词/图片: inputs read, the residency decided, the text encoded (the encoder freed before
 * anything of the sampling is allocated), then the pictures and audio through their encoders (each loaded and freed). */
export async function encodeConditions(m: H3Loaded, job: H3Job, textEncoderHost: H3TextEncoderHost, s: H3StageContext): Promise<H3Conditions> {
  const { o, ctx } = s;
  const { task, count, reference, geo } = job;
  const { e, transformer } = m;
  const { width, height } = task;
  // text: load the encoder, encode, free it before anything of the sampling is allocated
  ctx.stage(STAGE.loadTextEncoder);
  // keyframes onto the frame first: the text encoder may see them (keyframe-text.ts)
  // references on their own canvases instead (reference-inputs.ts); the video does not start on them
  const pictures = !count ? [] : reference ? await readReferences(task.images, { width, height }, ctx.signal, o.referenceCanvas) : await readKeyframes(task.images, width, height, ctx.signal);
  // the soundtrack and voices read before any model loads too: a file that is not audio fails here (conditioning/audio.ts)
  let audio = await readAudioInputs(task, ctx.signal);
  const residency = await decideResidency(o, { e, dtype: m.dtype, textEncoderDir: m.dirs.textEncoder, transformer, weightBytes: m.weightBytes }, geo, textEncoderHost);
  // the DiT's weights on the host from before the encoder loads until it is freed ('host' only)
  const dit: { held: HostHeld | null } = { held: null };
  let encoded: Awaited<ReturnType<typeof encodePromptRows>>;
  const uploaded = textEncoderHost.streamedUploadBytes;
  try {
    encoded = await encodePromptRows(e, {
      textEncoderDir: m.dirs.textEncoder, tokenizer: m.tokenizer, host: textEncoderHost, transformer, prompt: job.prompt, pictures, pictureRole: reference ? 'reference' : 'keyframe', voices: job.audioRefs,
      dtype: m.dtype, int8: o.textEncoderInt8, streamLayers: residency.textLayers === 'streamed', onText: o.onText, trace: s.trace,
      beforeLoad: residency.dit === 'host' ? async () => {
        // what is still on the GPU: streamed blocks are on the host already
        dit.held = await releaseToHost(e, transformer.weightTensors().filter((t) => !t.storage.onHost));
        residency.gpuToHostBytes = dit.held.bytes;
        s.trace('transformer on the host');
      } : undefined,
      afterFree: () => {
        if (!dit.held?.onHost) return;
        dit.held.restore();
        residency.hostToGpuBytes = dit.held.bytes;
        s.trace('transformer back');
      },
    }, ctx);
  } finally {
    // a failed encoding leaves the DiT on the GPU as it found it
    if (dit.held?.onHost) dit.held.restore();
  }
  const { text, textTags } = encoded;
  residency.textEncoderHostToGpuBytes = textEncoderHost.streamedUploadBytes - uploaded;

  // keyframes: the VAE encoder (its own load, freed before sampling)
  let latents: HostLatents[] = [];
  let audioRows: EncodedAudioInputs = { rows: new Float32Array(0), encoded: [] };
  try {
    if (task.speech) {
      // the speech model loads and is freed here, still in 编码提示词/图片 (the text encoder is already freed)
      s.trace('speech');
      const spoken = await task.speech(ctx);
      s.trace('speech made');
      throwIfCancelled(ctx.signal);
      audio = await withSpeech(task, spoken, ctx.signal);
    }
    if (count) {
      latents = await encodeKeyframes(e, m.dirs.vae, pictures, { tiling: o.tiling, signal: ctx.signal });
      s.trace(reference ? 'references encoded' : 'keyframes encoded');
    }
    // the leading audio rows, clean (t = 1.0): a track's guide (FL2VA), or the audio references (Ref2VA)
    audioRows = await encodeAudioInputs(e, m.dirs.audioVae, audio, geo.numAudioLatents, ctx.signal);
    if (audioRows.rows.length) s.trace(audio.voices.length ? 'audio references encoded' : 'track encoded');
  } catch (err) {
    text.free();
    throw err;
  }
  return { text, textTags, pictures, latents, audio, audioRows, residency };
}

/** The sampled latents on the host: video [C, F, h, w] (the generated frames only), audio [2, A, Na]. */
export interface H3Sampled {
  video: VideoLatents;
  audio: Float32Array;
}

/** 采样: the packed sequence, seeded noise with the conditioning rows, the dual-schedule sampler with progress, cancel
 * and the safe point per step; the latents read back. Takes `c.text`: every GPU tensor of the job is freed when it
 * returns or throws. */
export async function sampleLatents(m: H3Loaded, job: H3Job, c: H3Conditions, s: H3StageContext): Promise<H3Sampled> {
  const { o, ctx } = s;
  const { task, count, reference, geo, patch } = job;
  const { e, transformer } = m;
  const { text, latents, audioRows } = c;
  const { track, voices } = c.audio;
  const trackRows = audioRows.rows;
  const live: Tensor[] = [text];
  const drop = (t: Tensor) => {
    live.splice(live.indexOf(t), 1);
    t.free();
  };
  try {
    throwIfCancelled(ctx.signal);
    ctx.stage(STAGE.sample);
    const layout = {
      textTags: c.textTags,
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
      noise: o.noise ? o.noise(geo, C, A) : h3Noise(task.seed, geo, C, A),
    });
    live.push(video, audio);
    const rowWidth = video.shape[1]!;
    const nv = video.shape[0]! - nc;
    const plan = h3StepPlan(transformer.stepCount, task.steps);
    ctx.progress(plan.progressOffset, task.steps);
    s.trace('sampling');
    const uploadedBefore = transformer.blockOffload?.uploadedBytes ?? 0;
    try {
      const sampled = await sampleH3(e, transformer, seq, text, video, audio, {
        videoShift: transformer.videoShift, // the Ref2VA adapters' own (variants.ts H3ReferenceRun)
        ...o.sampler,
        steps: plan.gridPoints,
        sigmas: o.sigmas?.(plan.gridPoints),
        denoised: denoisedPreview(ctx, task.steps, async (x0) => h3PreviewFrames(e, x0, { channels: C, dims: [geo.numLatentFrames, geo.latentHeight, geo.latentWidth], patch }, await (m.projection ??= oneOff(ctx, () => fitH3Projection(m.videoVae, C)))), plan.progressOffset),
        onStep: async (done) => {
          // the step's GPU work done before it counts (the forwards are only recorded until then), and the event
          // loop turned once, so a DELETE that arrived meanwhile is seen at the check below
          await e.sync();
          ctx.progress(plan.progressOffset + done, task.steps);
          s.trace(`step ${plan.progressOffset + done}/${task.steps}`);
          throwIfCancelled(ctx.signal);
          await ctx.safePoint();
          throwIfCancelled(ctx.signal);
        },
      });
      c.residency.forwards = sampled.forwards;
      c.residency.samplingHostToGpuBytes = (transformer.blockOffload?.uploadedBytes ?? 0) - uploadedBefore;
      o.onResidency?.(c.residency);
    } finally {
      seq.free();
    }
    drop(text);
    const audioRead = await e.read(audio);
    const audioHost = channelsFromRows(audioRead.subarray(nca * A), 2, A, geo.numAudioLatents);
    drop(audio);
    if (track && !voices.length) o.onTrack?.({ track, rows: trackRows, after: audioRead.slice(0, nca * A) });
    if (voices.length) o.onVoices?.({ voices, encoded: audioRows.encoded, rows: trackRows, after: audioRead.slice(0, nca * A), track });
    if (nc && (reference ? o.onReferences : o.onKeyframes)) {
      const after = (await e.read(video)).slice(0, nc * rowWidth);
      if (reference) o.onReferences!({ pictures: c.pictures, latents, rows, after, prompt: job.prompt });
      else o.onKeyframes!({ pictures: c.pictures, latents, rows, after });
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
    o.onSampled?.(videoHost, { data: audioHost, shape: [2, A, geo.numAudioLatents] });
    throwIfCancelled(ctx.signal);
    return { video: videoHost, audio: audioHost };
  } finally {
    for (const t of live) t.free();
  }
}

/** 视频解码, 音频解码, 封装, 保存: the frames decoded (tiled, chunked) into the H.264 writer, the audio decoded (a track
 * job muxes its prepared clip instead), AAC muxed into a hidden temp sibling of the output, then fsync + rename. */
export async function decodeOutputs(m: H3Loaded, job: H3Job, c: H3Conditions, sampled: H3Sampled, s: H3StageContext): Promise<void> {
  const { o, ctx } = s;
  const { task } = job;
  const { width, height } = task;
  const { track } = c.audio;
  const A = m.transformer.config.audioInChannels;
  const tmp = tempSibling(task.outputPath);
  let writer: VideoWriter | null = null;
  try {
    ctx.stage(STAGE.videoDecode);
    s.trace('video decoding');
    const out = m.videoVae.outputShape(sampled.video.shape);
    if (out.frames !== task.frames || out.width !== width || out.height !== height) {
      throw new Error(`MiniMax H3: the video VAE decodes ${out.frames} frames of ${out.width}x${out.height}, the task wants ${task.frames} of ${width}x${height}`);
    }
    writer = await openVideoWriter({ path: tmp, width, height, frames: task.frames, floatRange: 'unit', signal: ctx.signal });
    let n = 0;
    ctx.progress(0, task.frames);
    for await (const frame of m.videoVae.frames(sampled.video, { tiling: o.tiling })) {
      o.onFrame?.(frame, n);
      await writer.writeFrame(frame);
      ctx.progress(++n, task.frames);
      throwIfCancelled(ctx.signal);
    }

    ctx.stage(STAGE.audioDecode);
    s.trace('audio decoding');
    // a track job's soundtrack is its clip, unchanged: the generated audio is not decoded
    const sound = track
      ? { channels: track.channels, sampleRate: track.sampleRate, samples: track.channels[0].length }
      : await m.audioVae.decode(m.e, sampled.audio, [2, A, job.geo.numAudioLatents]);
    if (!track) o.onAudio?.(sound.channels, sound.sampleRate);
    throwIfCancelled(ctx.signal);
    const planar = new Float32Array(sound.samples * 2);
    sound.channels.forEach((ch, i) => planar.set(ch, i * sound.samples));

    ctx.stage(STAGE.package);
    await writer.close({ data: planar, sampleRate: sound.sampleRate, channels: 2, layout: 'planar' });
    writer = null;
    throwIfCancelled(ctx.signal);
    ctx.stage(STAGE.save);
    await commitFile(tmp, task.outputPath);
    s.trace('saved');
  } finally {
    if (writer) await writer.abort();
    await removeQuietly(tmp);
  }
}
