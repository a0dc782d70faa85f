import { DEFAULT_PRIORITY, referencePrompt, type JobKind } from '../catalog';

export type JobStatus = 'queued' | 'running' | 'done' | 'failed';

/** What a pipeline needs beyond the job object's public fields. Stored with the job so a restart loses nothing. */
export interface JobParams {
  width: number;
  height: number;
  /** Input files saved under DATA_DIR/inputs/<id>/, in input order. */
  images: string[];
  audios: string[];
  image_mode?: 'keyframe' | 'reference';
  audio_mode?: 'voice' | 'track';
  tts_text?: string;
  tts_ref_text?: string;
  tts_language?: string;
}

/** The stored job. Public fields use the spec's names; `toJobObject` decides which appear. */
export interface JobRecord {
  id: string;
  kind: JobKind;
  status: JobStatus;
  prompt: string;
  profile: string;
  mode: string;
  aspect: string;
  res: string;
  size: string;
  seconds?: number;
  frames?: number;
  seed: number;
  steps: number;
  image_count: number;
  created: number;
  negative?: string;
  cfg?: number;
  size_from_ref?: boolean;
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
  params: JobParams;
}

/** Live state of the running job, kept in memory (not written at every step). */
export interface LiveState {
  stage: string;
  progress: { value: number; max: number };
  started: number;
}

/** The job object of the spec's table: which fields appear depends on kind and status. */
export function toJobObject(job: JobRecord, live: { position?: number; running?: LiveState; eta_s?: number }, nowS = Date.now() / 1000): Record<string, unknown> {
  const o: Record<string, unknown> = {
    id: job.id,
    kind: job.kind,
    status: job.status,
    prompt: job.prompt,
    profile: job.profile,
    mode: job.mode,
    aspect: job.aspect,
    res: job.res,
    size: job.size,
  };
  if (job.kind === 'video') {
    o.seconds = job.seconds;
    o.frames = job.frames;
  }
  // reference video jobs: `prompt` stays what was sent; the text the model is given, with a <Picture n> definition in
  // front for each picture the prompt does not name (catalog referencePrompt), is an extension (README "References")
  // and an <Audio n> definition for each voice (audio_mode voice, no tts_text: then the clips are voices), or for the
  // soundtrack (audio_mode track's clip or tts_text's speech: <Audio 1>, fully_copy)
  if (job.kind === 'video' && job.params.image_mode === 'reference' && job.image_count > 0) {
    const speech = !!job.params.tts_text?.trim();
    const soundtrack = speech || (job.params.audio_mode === 'track' && job.params.audios.length > 0);
    o.model_prompt = referencePrompt(job.prompt, job.image_count, soundtrack ? 0 : job.params.audios.length, soundtrack);
  }
  o.seed = job.seed;
  o.steps = job.steps;
  o.image_count = job.image_count;
  o.created = job.created;
  if (job.status === 'queued' && live.position !== undefined) o.position = live.position;
  // expected seconds until it finishes (an extension, README "ETA")
  if ((job.status === 'queued' || job.status === 'running') && live.eta_s !== undefined) o.eta_s = live.eta_s;
  if (job.status === 'running') {
    const r = live.running;
    o.progress = shownProgress(r?.progress, job.steps);
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
    o.negative = job.negative ?? '';
    o.cfg = job.cfg;
    o.size_from_ref = job.size_from_ref ?? false;
  }
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
