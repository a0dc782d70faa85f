// Shapes of the API's JSON as the page reads them (service-api.md and the README's API section).

export type Weights = 'real' | 'demo' | 'missing';

export interface Profile {
  profile: string;
  kind: 'video' | 'image';
  default_steps: number;
  default: boolean;
  description: string;
  modes: string[];
  max_images: number;
  max_audios: number;
  can_edit?: boolean;
  default_cfg?: number;
  model: string;
  available: boolean;
  weights: Weights;
  note?: string;
}

export interface Range {
  min: number;
  max: number;
}

export interface Config {
  version: string;
  profiles: Profile[];
  tts: { profile: string; available: boolean; weights: Weights; note?: string; languages: string[]; ref_audio_seconds: Range };
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
  };
  image: {
    aspects: string[];
    res: string[];
    sizes: Record<string, Record<string, [number, number]>>;
    explicit_size: Range & { multiple_of: number };
    max_images: Record<string, number>;
  };
  limits: { image_bytes: number; prompt_chars: number; max_steps: number; wait_timeout_s: number; max_queue: number };
}

export type JobStatus = 'queued' | 'running' | 'done' | 'failed';

export interface Job {
  id: string;
  kind: 'video' | 'image';
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
  position?: number;
  progress?: { value: number; max: number };
  stage?: string;
  elapsed?: number;
  exec_s?: number;
  video?: string;
  video_download?: string;
  image?: string;
  image_download?: string;
  negative?: string;
  cfg?: number;
  size_from_ref?: boolean;
  finished?: number;
  error?: string;
  callback_status?: number;
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
