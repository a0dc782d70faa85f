// What a GPU worker runs: one task per kind, with its parameters, as the API sends it (worker/protocol.ts, whose
// PROTOCOL_VERSION versions these shapes) and as each model's folder maps it onto its own task (minimax_h3/task.ts
// h3TaskOf, qwen_image21/task.ts, krea2/task.ts, qwen3_tts/task.ts, common/image-task.ts). Types only.

// The task parameters below are also what the job store keeps: a job record's `task` is its VideoParams or
// ImageParams as drafting made them (src/jobs/job.model.ts). A change to their shape bumps PROTOCOL_VERSION
// (worker/protocol.ts) and comes with a job-store migration (src/jobs/job.store.ts JOB_RECORD_FORMAT,
// upgradeJobRecord), so a stored job still runs.

import type { LoraParam } from './loras';

/** Model parameters of a video job. */
export interface VideoParams {
  prompt: string;
  seed: number;
  steps: number;
  width: number;
  height: number;
  /** On the catalog's 17k + 5 grid (the request's seconds, snapped). */
  frames: number;
  mode: string;
  image_mode: 'keyframe' | 'reference';
  audio_mode: 'voice' | 'track';
  tts_text: string;
  tts_ref_text: string;
  tts_language: string;
  /** LoRAs applied beside the DiT's linears for this job, in order (absent: none). */
  loras?: LoraParam[];
}

/** Model parameters of an image job. */
export interface ImageParams {
  prompt: string;
  negative: string;
  seed: number;
  steps: number;
  cfg: number;
  width: number;
  height: number;
  /** The size tier ('1K', '2K') or 'custom': reference images are scaled to it. */
  res: string;
  mode: string;
  /** LoRAs applied beside the transformer's linears for this job, in order (absent: none). */
  loras?: LoraParam[];
}

/** A speech request's parameters; its reference clip is audios[0]. */
export interface SpeechParams {
  text: string;
  language: string;
  /** Transcript of the reference clip; empty: clone from the speaker embedding alone. */
  ref_text: string;
  /** Absent: a fresh seed per request (the speech endpoints have no seed field). */
  seed?: number;
}

interface TaskBase {
  /** Job id, or tts_<id> for a speech request. */
  id: string;
  profile: string;
  /** Absolute paths of the input files (under DATA_DIR/inputs/<id>/), in request order. */
  images: string[];
  audios: string[];
  /** Absolute path the finished file must end up at (written under a temp name, then renamed). */
  output: string;
}

export type VideoTask = TaskBase & { kind: 'video'; params: VideoParams };
export type ImageTask = TaskBase & { kind: 'image'; params: ImageParams };
export type SpeechTask = TaskBase & { kind: 'tts'; params: SpeechParams };
/** One unit of GPU work. */
export type WorkerTask = VideoTask | ImageTask | SpeechTask;

