// Shapes of the API's JSON as the page reads them (service-api.md and the README's API section).
// Job and profile fields come from the server's own types (type-only imports, erased from the bundle), so the two
// cannot drift apart.

import type { IMAGE_DEFAULTS, ProfileInfo, ProfileSuggestion, TTS_DEFAULTS, VIDEO_DEFAULTS } from '../../src/catalog';
import type { ImageParams, VideoParams } from '../../src/catalog/tasks';
import type { ImageJobRecord, JobRecord, JobStatus, VideoJobRecord } from '../../src/jobs/job.model';

export type Weights = 'real' | 'demo' | 'missing';

/** A profile as GET /api/config lists it: the server's catalog entry plus what the service knows now. */
export interface Profile extends ProfileInfo {
  available: boolean;
  weights: Weights;
  note?: string;
  /** What its weights were made for, when narrow (a trained demo): the form preselects it. */
  suggested?: ProfileSuggestion;
}

export interface Range {
  min: number;
  max: number;
}

export interface Config {
  version: string;
  profiles: Profile[];
  /** `defaults` of each kind: the request's defaults, from the server's capability table (catalog/capabilities.ts). */
  tts: { profile: string; available: boolean; weights: Weights; note?: string; languages: string[]; ref_audio_seconds: Range; defaults: typeof TTS_DEFAULTS };
  video: {
    aspects: string[];
    res: string[];
    sizes: Record<string, Record<string, [number, number]>>;
    fps: number;
    seconds: Range & { default: number; options: { seconds: number; frames: number }[] };
    image_modes: string[];
    audio_modes: string[];
    max_images: number;
    max_audios: number;
    audio_seconds: Range;
    tts_languages: string[];
    defaults: typeof VIDEO_DEFAULTS;
  };
  image: {
    aspects: string[];
    res: string[];
    sizes: Record<string, Record<string, [number, number]>>;
    explicit_size: Range & { multiple_of: number };
    max_images: Record<string, number>;
    /** cfg: 0 (the profile's default) or from 1 to this. */
    max_cfg: number;
    defaults: typeof IMAGE_DEFAULTS;
  };
  limits: { image_bytes: number; prompt_chars: number; max_steps: number; wait_timeout_s: number; max_queue: number };
}

export type { JobStatus };

/** The job object (toJobObject on the server): the stored record's public fields and its task's, which fields appear
 * depending on kind and status, plus the live and output fields it adds. */
export interface Job
  extends Pick<JobRecord, 'id' | 'kind' | 'status' | 'profile' | 'aspect' | 'res' | 'size' | 'created'>,
    Pick<VideoParams & ImageParams, 'prompt' | 'mode' | 'seed' | 'steps'>,
    Partial<Pick<JobRecord, 'exec_s' | 'finished' | 'error' | 'callback_status'>>,
    Partial<Pick<VideoJobRecord, 'seconds'> & Pick<VideoParams, 'frames'> & Pick<ImageParams, 'negative' | 'cfg'> & Pick<ImageJobRecord, 'size_from_ref'>> {
  /** How many pictures the job was given (its inputs' count). */
  image_count: number;
  position?: number;
  /** Extension: expected seconds until the job finishes (queued and running). */
  eta_s?: number;
  priority?: number;
  progress?: { value: number; max: number };
  stage?: string;
  elapsed?: number;
  video?: string;
  video_download?: string;
  image?: string;
  image_download?: string;
}

export interface Status {
  online: boolean;
  current_job: string | null;
  queued: number;
}

export interface Health {
  ok?: boolean;
  gpu?: { available: boolean; name?: string; vendor?: string; backend?: string; software?: boolean; error?: string };
  queued?: number;
  current_job?: string | null;
}

/** One entry of a 422 body (pydantic style). */
export interface ValidationEntry {
  loc: (string | number)[];
  msg: string;
  type: string;
  input?: unknown;
}
