// A job's plan: the request drafted by the API's own rules (image/image.draft.ts, video/video.draft.ts), mapped to the
// model's task by the worker's own function (worker/profiles), run by the model's own pipeline on the shape-only engine
// (src/engine/plan-device.ts) over a planned checkpoint at the released sizes (layouts.ts). What it reports is what
// the pool and the meter counted: peak GPU bytes per stage (the spec's stage names), what each load stage left
// resident, FLOPs, bytes bound and dispatches per stage and per sampling step, and a predicted sampling time where
// the adapter has a measured rate (calibration.ts). Nothing is allocated on a device and no weight is read.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BadInputError } from '../common/errors';
import { IMAGE_PROFILES, STAGE, VIDEO_PROFILES } from '../catalog';
import { Engine } from '../engine/engine';
import { adapterProfile, type AdapterProfile } from '../engine/plan-device';
import type { RateClass, Work } from '../engine/meter';
import { draftImage, type ImageRequest } from '../image/image.draft';
import { draftVideo, type VideoRequest } from '../video/video.draft';
import { writePng, writeWav } from '../media';
import { Krea2Pipeline, krea2DemoLayout } from '../models/krea2';
import type { Pipeline } from '../models/common/pipeline';
import { measureRun, type StageCost } from '../models/common/stage-meter';
import { QwenImage21Pipeline } from '../models/qwen_image21/pipeline';
import type { ImageResidencyOptions, ImageResidencyReport, ImageTextResidency, ImageBlockOffload } from '../models/common/image-residency';
import { QWEN_IMAGE21_PROFILES } from '../worker/profiles/image';
import { qwenImageTaskOf } from '../models/qwen_image21/task';
import { KREA2_PROFILES } from '../worker/profiles/krea2';
import { krea2TaskOf } from '../models/krea2/task';
import { h3DirsFromRoot, type H3ResidencyReport } from '../models/minimax_h3/pipeline';
import { fmtBytes } from '../engine/memory';
import { h3Variant } from '../models/minimax_h3/variants';
import { acceptsFor, capabilitiesOf } from '../catalog';
import { h3ProfilePipeline, h3RootFiles, videoTaskPipeline } from '../worker/profiles/video';
import type { ImageTask, SpeechTask, VideoTask } from '../worker/protocol';
import { Qwen3TtsPipeline } from '../models/qwen3_tts/pipeline';
import { qwen3TtsTaskOf } from '../models/qwen3_tts/task';
import { taskPipeline } from '../worker/profiles/weights-source';
import { checkLanguage, checkPrompt, checkRefText } from '../jobs/job-requests';
import { CLIP_SECONDS, TTS_PROFILE } from '../catalog';
import { calibrationFor } from './calibration';
import { ratesFor, stepTime } from './step-time';
import { NEEDS_LESS } from './needs-less';
import { plannedH3Root, plannedKrea2Root, plannedQwen3TtsRoot, plannedQwenImage21Root } from './layouts';

/** A request as the JSON API takes it, plus `kind` where the fields do not say it; media inputs by size. */
export type PlanRequest = ImageRequest & VideoRequest & {
  kind?: 'image' | 'video' | 'tts';
  /** Input pictures: "WxH" strings or { width, height } (their sizes count; their contents do not). */
  images?: (string | { width: number; height: number })[];
  /** Input clips (video): lengths in seconds, or { seconds } (their lengths count; their contents do not). */
  audios?: (number | { seconds: number })[];
  /** Speech: the reference clip's length in seconds (or { seconds }); absent: a 10 s clip. `seconds` (speech): how
   * long the speech lasts (absent: as long as the pipeline lets the text run). */
  ref_audio?: number | { seconds: number };
  [field: string]: unknown;
};

export interface StagePlan {
  stage: string;
  peak_gpu_bytes: number;
  /** GPU bytes held when the stage ended (after a load stage: what it left resident). */
  held_gpu_bytes: number;
  flops: number;
  bytes: number;
  dispatches: number;
  steps: number;
}

/** What the plan ran: the drafted job's sizes and settings (image: cfg; video: frames, seconds, modes, clips). */
export interface PlannedJob {
  width?: number;
  height?: number;
  steps?: number;
  images?: number;
  /** Speech: the text's length in characters, the reference clip's seconds (10 when none was given). */
  text_chars?: number;
  ref_seconds?: number;
  language?: string;
  cfg?: number;
  frames?: number;
  seconds?: number;
  audios?: number;
  mode?: string;
  image_mode?: string;
  audio_mode?: string;
}

export interface JobPlan {
  kind: 'image' | 'video' | 'tts';
  profile: string;
  model: string;
  adapter: { id: string; name: string };
  job: PlannedJob;
  peak_gpu_bytes: number;
  /** The budget the plan was checked against (bytes), and whether the peak fits it. */
  budget_bytes: number;
  fits: boolean;
  stages: StagePlan[];
  /** Bytes each load stage left resident (weights and what the model keeps loaded). */
  resident: { stage: string; bytes: number }[];
  flops: number;
  bytes: number;
  dispatches: number;
  /** One sampling step's share (the sampling stage's work over its steps), and per rate class (engine/meter.ts:
   * gemm-small/medium/large by output size, attention, conv, memory: the classes with work). */
  per_step: {
    flops: number; bytes: number; dispatches: number; by_class: Record<string, { flops: number; bytes: number; dispatches: number }>;
    /** The step's GEMM and attention shapes (meter.ts labels), most FLOPs first: calls and FLOPs a step, and the share
     * of the step's FLOPs (what a sweep at the model's real shapes should time). */
    shapes: { shape: string; calls: number; flops: number; share: number }[];
  } | null;
  /** The sampling's predicted time: per step from the tuning table's measured rates (step-time.ts), else the
   * whole step's rate measured for the profile (calibration.ts), else none and why. */
  predicted: { step_s: number; sampling_s: number; by_class: Record<string, number>; basis: string } | { sampling_s: number; basis: string } | { none: string };
  /** What is streamed from host memory (`transformer_blocks` while sampling, `text_encoder_layers` while encoding) and
   * the host-to-GPU bytes per sampling step; the residency policy (`policy`, its parts joined by +) and what it uploads
   * once a job (the DiT's rest after the encoding, the text encoder's streamed layers). */
  offload: { streamed: string[]; host_to_gpu_bytes_per_step: number; policy: string; host_to_gpu_bytes_per_job: number; note: string };
  notes: string[];
}

export interface PlanOptions {
  adapter?: string | AdapterProfile;
  /** Bytes the job may hold (GPU_MEMORY_BUDGET); default the adapter's memory less 5 %. */
  budgetBytes?: number;
  /** An image job's text encoder placement forced (tests; default 'auto', the worker's policy). */
  imageTextResidency?: ImageTextResidency;
  /** Where the tuning tables with measured rates are read (default the repository's tuning/; tests). */
  tuningDir?: string;
  /** An image job's DiT block streaming forced (tests; default 'auto', the worker's policy). */
  imageBlockOffload?: ImageBlockOffload;
}

/** The kind a request is for: `kind`, else its profile's, else the fields it carries. */
export function kindOf(r: PlanRequest): 'image' | 'video' | 'tts' {
  if (r.kind !== undefined) {
    if (!['image', 'video', 'tts'].includes(r.kind)) throw new BadInputError(`kind must be image, video or tts (got ${JSON.stringify(r.kind)})`);
    return r.kind;
  }
  if (typeof r.profile === 'string') {
    if (IMAGE_PROFILES.some((p) => p.profile === r.profile)) return 'image';
    if (VIDEO_PROFILES.some((p) => p.profile === r.profile)) return 'video';
  }
  if ('text' in r) return 'tts';
  if (['size', 'negative_prompt', 'cfg', 'size_from_ref'].some((f) => f in r)) return 'image';
  if (['seconds', 'image_mode', 'audio_mode', 'tts_text'].some((f) => f in r)) return 'video';
  throw new BadInputError('say what the request is for: add "kind": "image", "video" or "tts" (or a profile)');
}

function imageSizes(r: PlanRequest): { width: number; height: number }[] {
  return (r.images ?? []).map((im, i) => {
    const m = typeof im === 'string' ? /^(\d+)x(\d+)$/.exec(im) : null;
    const s = typeof im === 'string' ? (m ? { width: Number(m[1]), height: Number(m[2]) } : null) : im;
    if (!s || !(Number.isInteger(s.width) && Number.isInteger(s.height) && s.width > 0 && s.height > 0)) {
      throw new BadInputError(`images[${i}]: give a picture's size as "WxH" or { "width", "height" } (got ${JSON.stringify(im)})`);
    }
    return s;
  });
}

function clipLengths(r: PlanRequest): number[] {
  return (r.audios ?? []).map((a, i) => {
    const s = typeof a === 'number' ? a : a?.seconds;
    if (typeof s !== 'number' || !Number.isFinite(s) || s <= 0 || s > 600) throw new BadInputError(`audios[${i}]: give a clip's length in seconds, as a number or { "seconds" } (got ${JSON.stringify(a)})`);
    return s;
  });
}

/** Writes flat grey pictures of the given sizes into `dir` (a plan's inputs: their sizes count, not their contents). */
async function greyPictures(dir: string, sizes: { width: number; height: number }[]): Promise<string[]> {
  const paths: string[] = [];
  for (const [i, s] of sizes.entries()) {
    const p = join(dir, `image${i}.png`);
    await writePng(p, { data: new Uint8Array(s.width * s.height * 3).fill(128), width: s.width, height: s.height }, { prompt: '', profile: '', seed: 0, steps: 0 });
    paths.push(p);
  }
  return paths;
}

export async function planJob(r: PlanRequest, o: PlanOptions = {}): Promise<JobPlan> {
  const kind = kindOf(r);
  const adapter = typeof o.adapter === 'object' ? o.adapter : adapterProfile(o.adapter ?? 'h200');
  const budget = o.budgetBytes ?? Math.floor(adapter.memoryBytes * 0.95);
  if (kind === 'video') return planVideo(r, adapter, budget, o.tuningDir);
  if (kind === 'tts') return planSpeech(r, adapter, budget, o.tuningDir);
  const sizes = imageSizes(r);
  const draft = draftImage(r, sizes.length);
  const profile = draft.profile.profile;
  if (profile in QWEN_IMAGE21_PROFILES && sizes.length > 0) {
    throw new BadInputError(`plans for editing on ${profile} are not built yet: the Qwen3-VL-8B vision tower's config is not known here (models/qwen_image21/released.ts); plan the text-to-image job without images`);
  }
  const scratch = mkdtempSync(join(tmpdir(), 'kiln-plan-'));
  const e = Engine.createShapeOnly(adapter);
  try {
    // the pictures' contents do not matter to a plan, their sizes do: flat grey files of those sizes
    const images = await greyPictures(scratch, sizes);
    const task: ImageTask = {
      id: 'plan', profile, kind: 'image', images, audios: [], output: join(scratch, 'out.png'),
      params: { prompt: draft.prompt, negative: draft.negative, seed: draft.seed, steps: draft.steps, cfg: draft.cfg, width: draft.width, height: draft.height, res: draft.res, mode: draft.mode },
    };
    let imageResidency: ImageResidencyReport | undefined;
    const stages = await measurePlanned(e, task, { memoryBudgetBytes: budget, textResidency: o.imageTextResidency, blockOffload: o.imageBlockOffload, onResidency: (r) => (imageResidency = r) });
    return report(stages, {
      imageResidency, tuningDir: o.tuningDir,
      adapter, budget, profile, model: draft.profile.model ?? profile, kind: 'image', job: { width: draft.width, height: draft.height, steps: draft.steps, cfg: draft.cfg, images: sizes.length },
      notes: ['the prompt is tokenized by a byte-level stand-in for the real tokenizer (not shipped): the text side is an upper bound'],
    });
  } finally {
    e.destroy();
    rmSync(scratch, { recursive: true, force: true });
  }
}

/** A video job: drafted by the API's rules (draftVideo), held to what the worker's entry accepts (acceptsFor with the
 * released weights' run-time facts), run through the worker's own pipeline (h3ProfilePipeline, videoTaskPipeline and so
 * h3TaskOf) over the planned released checkpoint. */
async function planVideo(r: PlanRequest, adapter: AdapterProfile, budget: number, tuningDir?: string): Promise<JobPlan> {
  const sizes = imageSizes(r);
  const clips = clipLengths(r);
  const d = draftVideo(r, sizes.length, clips.length);
  const profile = d.profile.profile;
  const variant = h3Variant(profile);
  // the planned checkpoint is the whole release (both DiT partitions, every adapter): the worker's run-time facts hold
  const accepts = acceptsFor(capabilitiesOf('video', profile)!, { ref2va: true });
  const tts = d.tts_text.trim() !== '';
  if (sizes.length > 0 && accepts.imageModes && !accepts.imageModes.includes(d.image_mode)) throw new BadInputError(`image_mode ${d.image_mode}: profile ${profile} cannot run it: ${accepts.inputsNote}`);
  if (clips.length > 0 && !tts && accepts.audioModes && !accepts.audioModes.includes(d.audio_mode)) throw new BadInputError(`audio_mode ${d.audio_mode}: profile ${profile} cannot run it: ${accepts.inputsNote}`);
  const scratch = mkdtempSync(join(tmpdir(), 'kiln-plan-'));
  const e = Engine.createShapeOnly(adapter);
  try {
    const images = await greyPictures(scratch, sizes);
    const audios: string[] = [];
    for (const [i, seconds] of clips.entries()) {
      // silence of the clip's length, at 32 kHz stereo (what the model's audio side takes)
      const p = join(scratch, `audio${i}.wav`);
      await writeWav(p, { data: new Float32Array(Math.round(seconds * 32000) * 2), sampleRate: 32000, channels: 2, layout: 'interleaved' });
      audios.push(p);
    }
    const task: VideoTask = {
      id: 'plan', kind: 'video', profile, images, audios, output: join(scratch, 'out.mp4'),
      params: {
        prompt: d.prompt, seed: d.seed, steps: d.steps, width: d.width, height: d.height, frames: d.frames, mode: d.mode,
        image_mode: d.image_mode, audio_mode: d.audio_mode, tts_text: d.tts_text, tts_ref_text: d.tts_ref_text, tts_language: d.tts_language,
      },
    };
    const root = await plannedH3Root();
    // tts_text speaks first, inside the text stage, with the speech model (the worker's composition, video-speech.ts)
    const ttsRoot = tts ? await plannedQwen3TtsRoot() : '';
    const speech = ({ onAudio }: { onAudio?: (samples: Float32Array) => void }) => new Qwen3TtsPipeline({ engine: async () => e, checkpoint: async () => ttsRoot, onAudio });
    // the worker's residency policy against the plan's budget (the DiT on the host while the text encoder runs, when
    // both would not fit)
    let residency: H3ResidencyReport | undefined;
    const pipe = videoTaskPipeline(h3ProfilePipeline(variant, {
      engine: async () => e, locate: async () => ({ dirs: h3DirsFromRoot(root), files: h3RootFiles(variant, root) }),
      memoryBudgetBytes: budget, onResidency: (r) => (residency = r),
    }), speech);
    let stages: StageCost[];
    try {
      stages = await measureRun(e, pipe, task);
    } finally {
      await pipe.unload();
    }
    return report(stages, {
      tuningDir, adapter, budget, profile, model: d.profile.model ?? 'MiniMax H3', kind: 'video',
      job: { width: d.width, height: d.height, frames: d.frames, seconds: d.seconds, steps: d.steps, images: sizes.length, audios: clips.length, mode: d.mode, image_mode: d.image_mode, audio_mode: d.audio_mode },
      notes: [
        'the prompt is tokenized by a byte-level stand-in for the real tokenizer (not published): the text side is an upper bound',
        ...(tts ? [SPEECH_LENGTH_NOTE] : []),
        ...(variant.adapter ? [`the ${variant.adapter} turbo adapter is merged as weights are read, which a plan never does: the load stage's work leaves out the merge (its memory is the same)`] : []),
      ],
      residency,
    });
  } finally {
    e.destroy();
    rmSync(scratch, { recursive: true, force: true });
  }
}

const SPEECH_LENGTH_NOTE = 'speech: a plan\'s model never picks the end of speech, so it speaks for the most frames the pipeline allows the text (3 s plus 0.3 s a text unit, pipeline.ts maxNewTokensFor): an upper bound';

/** The reference clip's length: `ref_audio` as seconds, else 10 s; within the speech clip limits, as the API checks. */
function refSeconds(r: PlanRequest): number {
  const a = r.ref_audio;
  const s = a === undefined ? 10 : typeof a === 'number' ? a : a?.seconds;
  const { minS, maxS } = CLIP_SECONDS.speech;
  if (typeof s !== 'number' || !Number.isFinite(s) || s < minS || s > maxS) throw new BadInputError(`ref_audio: give the reference clip's length in seconds, ${minS} to ${maxS}, as a number or { "seconds" } (got ${JSON.stringify(a)})`);
  return s;
}

/** A speech request: checked as POST /api/v1/tts checks it, a silent reference clip of its length (10 s when none is
 * given), run through the tts entry's pipeline (Qwen3TtsPipeline, qwen3TtsTaskOf) over the planned 1.7B checkpoint. */
async function planSpeech(r: PlanRequest, adapter: AdapterProfile, budget: number, tuningDir?: string): Promise<JobPlan> {
  const text = checkPrompt(r.text as string | undefined, 'text');
  const language = checkLanguage(r.language as string | undefined, 'language');
  const refText = checkRefText(r.ref_text as string | undefined, 'ref_text');
  const seconds = refSeconds(r);
  // the speech's length: `seconds` where given (a plan's model never ends it by itself), else the pipeline's cap
  const speak = r.seconds;
  if (speak !== undefined && (typeof speak !== 'number' || !Number.isFinite(speak) || speak <= 0 || speak > 600)) throw new BadInputError(`seconds: the speech's length to plan for, more than 0 and at most 600 (got ${JSON.stringify(speak)})`);
  const scratch = mkdtempSync(join(tmpdir(), 'kiln-plan-'));
  const e = Engine.createShapeOnly(adapter);
  try {
    const clip = join(scratch, 'ref.wav');
    await writeWav(clip, { data: new Float32Array(Math.round(seconds * 24000)), sampleRate: 24000, channels: 1, layout: 'interleaved' });
    const task: SpeechTask = { id: 'plan', kind: 'tts', profile: TTS_PROFILE, params: { text, language, ref_text: refText, seed: 0 }, images: [], audios: [clip], output: join(scratch, 'out.wav') };
    const root = await plannedQwen3TtsRoot();
    // frames at 12.5 Hz, one talker token more (generate.ts); the pipeline caps it by the text (maxNewTokensFor) as ever
    const generation = speak === undefined ? undefined : { maxNewTokens: Math.ceil(speak * 12.5) + 1 };
    const pipe = taskPipeline(new Qwen3TtsPipeline({ engine: async () => e, checkpoint: async () => root, generation }), 'tts', qwen3TtsTaskOf);
    let stages: StageCost[];
    try {
      stages = await measureRun(e, pipe, task);
    } finally {
      await pipe.unload();
    }
    return report(stages, {
      tuningDir, adapter, budget, profile: TTS_PROFILE, model: 'Qwen3-TTS-12Hz-1.7B-Base', kind: 'tts',
      job: { text_chars: [...text].length, ref_seconds: seconds, language, ...(speak !== undefined ? { seconds: speak } : {}) },
      notes: [
        ...(r.ref_audio === undefined ? ['no ref_audio given: a 10 s reference clip is assumed'] : []),
        speak === undefined ? SPEECH_LENGTH_NOTE : `speech: ${speak} s asked (seconds), at most what the pipeline allows the text (3 s plus 0.3 s a text unit)`,
        'the text is tokenized by a byte-level stand-in for the real tokenizer: the text side is an upper bound',
      ],
    });
  } finally {
    e.destroy();
    rmSync(scratch, { recursive: true, force: true });
  }
}

/** The profile's pipeline on the planned checkpoint, measured on e over the worker's own mapping of the task. */
async function measurePlanned(e: Engine, task: ImageTask, residency: ImageResidencyOptions): Promise<StageCost[]> {
  const run = async <T>(pipe: Pipeline<T>, t: T) => {
    try {
      return await measureRun(e, pipe, t);
    } finally {
      await pipe.unload();
    }
  };
  if (task.profile in KREA2_PROFILES) {
    const { int8 } = KREA2_PROFILES[task.profile as keyof typeof KREA2_PROFILES];
    const root = await plannedKrea2Root();
    return run(new Krea2Pipeline({ engine: async () => e, layout: async () => krea2DemoLayout(root), int8, ...residency }), krea2TaskOf(task));
  }
  if (task.profile in QWEN_IMAGE21_PROFILES) {
    const { int8 } = QWEN_IMAGE21_PROFILES[task.profile as keyof typeof QWEN_IMAGE21_PROFILES];
    const root = await plannedQwenImage21Root();
    return run(new QwenImage21Pipeline({ engine: async () => e, checkpoint: async () => root, int8, ...residency }), qwenImageTaskOf(task));
  }
  throw new BadInputError(`plans for profile ${task.profile} are not built yet`);
}

function report(stages: StageCost[], c: { tuningDir?: string; adapter: AdapterProfile; budget: number; profile: string; model: string; kind: JobPlan['kind']; job: PlannedJob; notes: string[]; residency?: H3ResidencyReport; imageResidency?: ImageResidencyReport }): JobPlan {
  const rows: StagePlan[] = stages.map((s) => ({
    stage: s.stage, peak_gpu_bytes: s.peakGpuBytes, held_gpu_bytes: s.heldGpuBytes, flops: s.work.flops, bytes: s.work.bytes, dispatches: s.work.dispatches, steps: s.steps,
  }));
  const sum = (f: (s: StagePlan) => number) => rows.reduce((a, s) => a + f(s), 0);
  const peak = Math.max(0, ...rows.map((s) => s.peak_gpu_bytes));
  const resident: JobPlan['resident'] = [];
  let held = 0;
  for (const s of rows) {
    // the text encoder's own bytes where the DiT left the GPU for it (the stage's held bytes net out the two)
    const own = s.stage === STAGE.loadTextEncoder && c.residency?.textLayers === 'streamed' ? 0
      : s.stage === STAGE.loadTextEncoder && c.residency?.dit === 'host' ? c.residency.textEncoderBytes : s.held_gpu_bytes - held;
    if (s.stage === STAGE.loadModel || s.stage === STAGE.loadTextEncoder) resident.push({ stage: s.stage, bytes: own });
    held = s.held_gpu_bytes;
  }
  const sampling = rows.find((s) => s.stage === STAGE.sample && s.steps > 0);
  const sampled = stages.find((s) => s.stage === STAGE.sample && s.steps > 0);
  const perStep = sampling && sampled ? {
    flops: sampling.flops / sampling.steps, bytes: sampling.bytes / sampling.steps, dispatches: sampling.dispatches / sampling.steps,
    by_class: Object.fromEntries(Object.entries(sampled.byRate).filter(([, w]) => w.dispatches > 0)
      .map(([k, w]) => [k, { flops: w.flops / sampled.steps, bytes: w.bytes / sampled.steps, dispatches: w.dispatches / sampled.steps }])),
    shapes: [...sampled.shapes].sort((a, b) => b[1].flops - a[1].flops)
      .map(([shape, w]) => ({ shape, calls: w.dispatches / sampled.steps, flops: w.flops / sampled.steps, share: sampling.flops > 0 ? w.flops / sampling.flops : 0 })),
  } : null;
  const predicted = predict(stages, c.adapter, c.profile, c.tuningDir);
  return {
    kind: c.kind, profile: c.profile, model: c.model, adapter: { id: c.adapter.id, name: c.adapter.name }, job: c.job,
    peak_gpu_bytes: peak, budget_bytes: c.budget, fits: peak <= c.budget,
    stages: rows, resident, flops: sum((s) => s.flops), bytes: sum((s) => s.bytes), dispatches: sum((s) => s.dispatches),
    per_step: perStep, predicted,
    offload: c.imageResidency ? imageOffloadOf(c.imageResidency, peak, c.budget) : offloadOf(c.kind, c.residency, sampling?.steps ?? 0, peak, c.budget),
    notes: c.notes,
  };
}


/** The sampling's predicted time (JobPlan.predicted): the tuning table's rates over the step's work per rate class,
 * else the profile's measured whole-step rate, else none, with both reasons. */
function predict(stages: StageCost[], adapter: AdapterProfile, profile: string, tuningDir?: string): JobPlan['predicted'] {
  const sampling = stages.find((s) => s.stage === STAGE.sample && s.steps > 0);
  if (!sampling) return { none: 'the job has no sampling steps' };
  const found = ratesFor(adapter, tuningDir);
  let why: string;
  if ('table' in found) {
    const perStep = Object.fromEntries(Object.entries(sampling.byRate).map(([k, w]) => [k, { dispatches: w.dispatches / sampling.steps, flops: w.flops / sampling.steps, bytes: w.bytes / sampling.steps }])) as Record<RateClass, Work>;
    const t = stepTime(perStep, found.table.rates!, `${found.file}'s rates${found.table.measured ? ` (measured ${found.table.measured})` : ''}, no overlap between dispatches assumed`);
    if ('step_s' in t) return { step_s: t.step_s, sampling_s: t.step_s * sampling.steps, by_class: t.by_class, basis: t.basis };
    why = `${found.file} has no rate for ${t.missing.join(', ')}`;
  } else why = found.none;
  const cal = calibrationFor(adapter.id, profile);
  if (cal) return { sampling_s: sampling.work.flops / cal.flopsPerSecond, basis: cal.basis };
  return { none: `${why}; no measured whole-step rate for ${profile} on ${adapter.name} either (docs/performance.md lists the measured ones)` };
}

/** The plan's offload field: what the video job's residency policy did (the DiT during the text encoding, its blocks
 * during sampling), and for a job over the budget, what it needs. */
function offloadOf(kind: JobPlan['kind'], r: H3ResidencyReport | undefined, steps: number, peak: number, budget: number): JobPlan['offload'] {
  const streamed = r?.blocks === 'streamed';
  const textHost = r?.dit === 'host';
  const layers = r?.textLayers === 'streamed';
  const policy = [streamed ? 'blocks-streamed' : '', textHost ? 'dit-on-host-while-encoding' : '', layers ? 'text-encoder-streamed' : ''].filter(Boolean).join('+') || 'resident';
  const perStep = streamed && steps > 0 ? Math.round(r!.samplingHostToGpuBytes / steps) : 0;
  const said: string[] = [];
  if (textHost) said.push(`the DiT's weights (${fmtBytes(r!.hostToGpuBytes)}) wait in host memory while the text encoder is on the GPU, uploaded again once it is freed`);
  if (layers) said.push(`the text encoder's decoder layers (${fmtBytes(r!.textEncoderBytes)} on the GPU whole) live in host memory and are uploaded in turn while encoding (two on the GPU at a time, ${fmtBytes(r!.textEncoderStreamedBytes)}): ${fmtBytes(r!.textEncoderHostToGpuBytes)} host-to-GPU a job`);
  else if (textHost) said.push(`the text encoder takes ${fmtBytes(r!.textEncoderBytes)}`);
  if (streamed) said.push(`the DiT's transformer blocks (${fmtBytes(r!.blockHostBytes)}) live in host memory and are uploaded in turn for each forward and AdaLN table build (two on the GPU at a time): ${fmtBytes(perStep)} host-to-GPU a step`);
  if (!r) said.push('nothing is offloaded for this kind of job');
  else if (!said.length) said.push('everything stays resident: it fits the budget');
  if (peak > budget) said.push(`it does not fit even so: it needs ${fmtBytes(peak)} of GPU memory, over the ${fmtBytes(budget)} budget; ${NEEDS_LESS[kind]}`);
  return {
    streamed: [...(streamed ? ['transformer_blocks'] : []), ...(layers ? ['text_encoder_layers'] : [])], host_to_gpu_bytes_per_step: perStep, policy,
    host_to_gpu_bytes_per_job: (textHost ? r!.hostToGpuBytes : 0) + (layers ? r!.textEncoderHostToGpuBytes : 0), note: said.join('; '),
  };
}

/** The plan's offload field for an image job: the DiT's blocks while sampling, and where its text encoder was
 * (models/common/image-residency.ts). */
function imageOffloadOf(r: ImageResidencyReport, peak: number, budget: number): JobPlan['offload'] {
  const said: string[] = [];
  const blocks = r.blocks === 'streamed';
  const perStep = blocks && r.steps > 0 ? Math.round(r.samplingHostToGpuBytes / r.steps) : 0;
  if (blocks) said.push(`the DiT's transformer blocks (${fmtBytes(r.blockHostBytes)}) live in host memory and are uploaded in turn for each forward (two on the GPU at a time): ${fmtBytes(perStep)} host-to-GPU a step`);
  if (r.textEncoder === 'resident' && !blocks) said.push('everything stays resident: it fits the budget');
  if (r.textEncoder === 'offloaded') said.push(`the text encoder (${fmtBytes(r.textEncoderBytes)}) waits in host memory once the prompt is encoded, uploaded again before the next job's encoding: ${fmtBytes(r.hostToGpuBytes)} host-to-GPU a job`);
  if (r.textEncoder === 'streamed') said.push(`the text encoder's decoder layers (${fmtBytes(r.textEncoderBytes)} on the GPU whole) live in host memory and are uploaded in turn while encoding (two on the GPU at a time): ${fmtBytes(r.streamedBytes)} host-to-GPU a job`);
  if (r.textEncoder === 'streamed' && r.offloadedBytes > 0) said.push(`its embeddings and vision tower (${fmtBytes(r.offloadedBytes)}) wait in host memory while the DiT samples, uploaded again before the next job's encoding`);
  if (peak > budget) said.push(`it does not fit even so: it needs ${fmtBytes(peak)} of GPU memory, over the ${fmtBytes(budget)} budget; ${NEEDS_LESS.image}`);
  const text = r.textEncoder === 'resident' ? '' : r.textEncoder === 'streamed' && r.offloadedBytes > 0 ? 'text-encoder-streamed+text-encoder-rest-offloaded' : `text-encoder-${r.textEncoder}`;
  return {
    streamed: [...(blocks ? ['transformer_blocks'] : []), ...(r.textEncoder === 'streamed' ? ['text_encoder_layers'] : [])], host_to_gpu_bytes_per_step: perStep,
    policy: [blocks ? 'blocks-streamed' : '', text].filter(Boolean).join('+') || 'resident', host_to_gpu_bytes_per_job: r.hostToGpuBytes, note: said.join('; '),
  };
}
