import { DEFAULT_PRIORITY, referencePrompt, VIDEO_DEFAULTS, type JobKind } from '../catalog';
import type { ImageParams, VideoParams } from '../worker/protocol';

export type JobStatus = 'queued' | 'running' | 'done' | 'failed';

/** What every stored job has, whatever its kind. Public fields use the spec's names; `toJobObject` decides which appear. */
interface JobBase {
  id: string;
  status: JobStatus;
  profile: string;
  aspect: string;
  res: string;
  size: string;
  created: number;
  started?: number;
  finished?: number;
  exec_s?: number;
  error?: string;
  /** Output file name under DATA_DIR/out (set when done). */
  output?: string;
  callback_url?: string | null;
  callback_status?: number;
  /** 0..9, higher first (an extension; absent in records from before it: 5). */
  priority?: number;
  /** The GPU worker (WORKER_NAME) it was sent to: after an API restart, where to look for it (QUEUE=redis). */
  worker?: string;
  /** Input files saved under DATA_DIR/inputs/<id>/, in input order: the task's images and audios. */
  inputs: { images: string[]; audios: string[] };
}

/** A video job: `task` is what the GPU worker runs (the protocol's VideoParams, as drafting made it); `seconds` is what
 * the request asked for (the task runs `task.frames`, on the 17k + 5 grid). */
export interface VideoJobRecord extends JobBase {
  kind: 'video';
  seconds: number;
  task: VideoParams;
}

/** An image job: `task` is what the GPU worker runs (the protocol's ImageParams). */
export interface ImageJobRecord extends JobBase {
  kind: 'image';
  size_from_ref: boolean;
  task: ImageParams;
}

/** The stored job: one typed task per kind, stored as the worker takes it, so a job has one shape from drafting to the
 * worker (the job store migrates the records of older builds: job.store.ts upgradeJobRecord). */
export type JobRecord = VideoJobRecord | ImageJobRecord;

/** A record as an older build wrote it (record format 0): the public fields flat, the rest in a `params` bag. */
interface FlatJobRecord {
  kind: JobKind; prompt: string; mode: string; seconds?: number; frames?: number; seed: number; steps: number; negative?: string; cfg?: number;
  size_from_ref?: boolean; res: string;
  params: { width: number; height: number; images?: string[]; audios?: string[]; image_mode?: VideoParams['image_mode']; audio_mode?: VideoParams['audio_mode']; tts_text?: string; tts_ref_text?: string; tts_language?: string };
}

/** A stored record in this build's shape: a record of an older build (flat fields plus `params`) becomes its typed
 * task, with the defaults the older build's worker task applied where a field was absent; a current one is returned as
 * it is. */
export function upgradeJobRecord(stored: unknown): JobRecord {
  const o = stored as Record<string, unknown>;
  if ('task' in o) return o as unknown as JobRecord;
  const { params: p, prompt, mode, seconds, frames, seed, steps, negative, cfg, size_from_ref, image_count: _count, ...rest } = o as unknown as FlatJobRecord & { image_count?: number };
  const base = { ...(rest as unknown as Omit<JobBase, 'inputs'>), inputs: { images: p.images ?? [], audios: p.audios ?? [] } };
  const common = { prompt, seed, steps, width: p.width, height: p.height, mode };
  if (o.kind === 'image') {
    return { ...base, kind: 'image', size_from_ref: size_from_ref ?? false, task: { ...common, negative: negative ?? '', cfg: cfg ?? 1, res: base.res } };
  }
  const def = VIDEO_DEFAULTS;
  return {
    ...base, kind: 'video', seconds: seconds ?? 0,
    task: {
      ...common, frames: frames ?? 0, image_mode: p.image_mode ?? def.image_mode, audio_mode: p.audio_mode ?? def.audio_mode,
      tts_text: p.tts_text ?? def.tts_text, tts_ref_text: p.tts_ref_text ?? def.tts_ref_text, tts_language: p.tts_language ?? def.tts_language,
    },
  };
}

/** Live state of the running job, kept in memory (not written at every step). */
export interface LiveState {
  stage: string;
  progress: { value: number; max: number };
  started: number;
}

/** The job object of the spec's table: which fields appear depends on kind and status. */
export function toJobObject(job: JobRecord, live: { position?: number; running?: LiveState; eta_s?: number }, nowS = Date.now() / 1000): Record<string, unknown> {
  const t = job.task;
  const o: Record<string, unknown> = {
    id: job.id,
    kind: job.kind,
    status: job.status,
    prompt: t.prompt,
    profile: job.profile,
    mode: t.mode,
    aspect: job.aspect,
    res: job.res,
    size: job.size,
  };
  const imageCount = job.inputs.images.length;
  if (job.kind === 'video') {
    o.seconds = job.seconds;
    o.frames = job.task.frames;
  }
  // reference video jobs: `prompt` stays what was sent; the text the model is given, with a <Picture n> definition in
  // front for each picture the prompt does not name (catalog referencePrompt), is an extension (README "References")
  // and an <Audio n> definition for each voice (audio_mode voice, no tts_text: then the clips are voices), or for the
  // soundtrack (audio_mode track's clip or tts_text's speech: <Audio 1>, fully_copy)
  if (job.kind === 'video' && job.task.image_mode === 'reference' && imageCount > 0) {
    const speech = !!job.task.tts_text.trim();
    const audios = job.inputs.audios.length;
    const soundtrack = speech || (job.task.audio_mode === 'track' && audios > 0);
    o.model_prompt = referencePrompt(t.prompt, imageCount, soundtrack ? 0 : audios, soundtrack);
  }
  o.seed = t.seed;
  o.steps = t.steps;
  o.image_count = imageCount;
  o.created = job.created;
  if (job.status === 'queued' && live.position !== undefined) o.position = live.position;
  // expected seconds until it finishes (an extension, README "ETA")
  if ((job.status === 'queued' || job.status === 'running') && live.eta_s !== undefined) o.eta_s = live.eta_s;
  if (job.status === 'running') {
    const r = live.running;
    o.progress = shownProgress(r?.progress, t.steps);
    o.stage = r?.stage ?? '加载模型';
    o.elapsed = round3(nowS - (r?.started ?? job.started ?? nowS));
  }
  if (job.status === 'done') {
    o.exec_s = job.exec_s;
    if (job.kind === 'video') {
      o.video = `/out/${job.output}`;
      o.video_download = `/api/jobs/${job.id}/video`;
    } else {
      o.image = `/out/${job.output}`;
      o.image_download = `/api/jobs/${job.id}/image`;
    }
  }
  if (job.kind === 'image') {
    o.negative = job.task.negative;
    o.cfg = job.task.cfg;
    o.size_from_ref = job.size_from_ref;
  }
  // the LoRAs it ran with, by name and scale (an extension, docs/loras.md): reusing them reproduces the picture / video
  if (job.task.loras?.length) o.loras = job.task.loras.map(({ name, scale }) => ({ name, scale }));
  if (job.status === 'done' || job.status === 'failed') o.finished = job.finished;
  o.priority = job.priority ?? DEFAULT_PRIORITY;
  // the GPU worker it went to (an extension; one name per host in a fleet)
  if (job.worker && job.status !== 'queued') o.worker = job.worker;
  if (job.status === 'failed') o.error = job.error;
  if (job.callback_status !== undefined) o.callback_status = job.callback_status;
  return o;
}

export function round3(x: number): number {
  return Math.round(x * 1000) / 1000;
}

/** A running job's progress as the API shows it, in the job object and in stage/progress events alike: until the
 * pipeline reports its first step, the job's own step count is the max (never "0 of 0"). */
export function shownProgress(p: { value: number; max: number } | undefined, steps: number): { value: number; max: number } {
  return { value: p?.value ?? 0, max: p?.max || steps };
}
