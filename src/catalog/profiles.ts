// The spec's profiles (service-api.md "Reference tables") as /api/config lists them: which open model serves each one,
// its default steps, modes and input limits, read from the capability table (capabilities.ts).

import { IMAGE_CAPABILITIES, VIDEO_CAPABILITIES } from './capabilities';

export type JobKind = 'video' | 'image';
/** Every kind of GPU work: jobs, and speech requests (synchronous, no job record). */
export type TaskKind = JobKind | 'tts';
export type VideoMode = 't2v' | 'i2v';
export type ImageMode = 't2i' | 'edit';

export interface ProfileInfo {
  profile: string;
  kind: JobKind;
  default_steps: number;
  description: string;
  /** The spec's default profile of its kind. */
  default: boolean;
  /** Modes the profile accepts. */
  modes: string[];
  max_images: number;
  max_audios: number;
  /** Image profiles: whether images mean editing (true) or style references (false). */
  can_edit?: boolean;
  default_cfg?: number;
  /** The open model behind the profile (shared/spec/models.md). */
  model: string;
}

/** What the weights a profile runs now were made for, when that is narrow (a trained demo checkpoint): the page
 * preselects it. An extension of /api/config's profile entries (`suggested`). */
export interface ProfileSuggestion {
  /** Image profiles: an explicit size the weights were trained at, "<w>x<h>". */
  size?: string;
  /** Video profiles: the aspect, tier and length (seconds) the weights were trained at. */
  aspect?: string;
  res?: string;
  seconds?: number;
  /** A prompt they follow. */
  prompt: string;
  /** Why, in a sentence for the page. */
  why: string;
}

/** The spec's profiles as /api/config lists them: a view of the capability table (capabilities.ts). */
export const VIDEO_PROFILES: ProfileInfo[] = VIDEO_CAPABILITIES.map((c) => ({
  profile: c.profile, kind: c.kind, default_steps: c.steps.default, default: c.profile === c.defaults.profile, description: c.description,
  modes: [...c.modes], max_images: c.images.max, max_audios: c.audios.max, model: c.model,
}));

export const IMAGE_PROFILES: ProfileInfo[] = IMAGE_CAPABILITIES.map((c) => ({
  profile: c.profile, kind: c.kind, default_steps: c.steps.default, default: c.profile === c.defaults.profile, default_cfg: c.cfg.default,
  can_edit: c.can_edit, description: c.description, modes: [...c.modes], max_images: c.images.max, max_audios: c.audios.max, model: c.model,
}));

export const TTS_PROFILE = 'tts';
/** The open model behind the speech profile. */
export const TTS_MODEL = 'Qwen3-TTS';

export function findProfile(kind: JobKind, profile: string): ProfileInfo | undefined {
  return (kind === 'video' ? VIDEO_PROFILES : IMAGE_PROFILES).find((p) => p.profile === profile);
}

/** "profile imgart_turbo: the Krea 2 Turbo model is not built into this service yet, so it cannot run image jobs" */
export function notBuilt(kind: string, profile: string): string {
  return `profile ${profile}: the ${modelOf(kind, profile) ?? kind} model is not built into this service yet, so it cannot run ${kind} jobs`;
}

/** The open model behind a (kind, profile), or undefined for a profile the catalog does not have. */
export function modelOf(kind: string, profile: string): string | undefined {
  if (kind === 'tts') return profile === TTS_PROFILE ? TTS_MODEL : undefined;
  return kind === 'video' || kind === 'image' ? findProfile(kind, profile)?.model : undefined;
}
