// The spec's profiles (service-api.md "Reference tables") as data: which open model serves each one, its default
// steps, modes and input limits. Everything user-visible about a profile comes from here.

import { VIDEO_MAX_AUDIOS, VIDEO_MAX_IMAGES } from './limits';

export type JobKind = 'video' | 'image';
/** Every kind of GPU work: jobs, and speech requests (synchronous, no job record). */
export type TaskKind = JobKind | 'tts';
export type VideoMode = 't2v' | 'i2v';
export type ImageMode = 't2i' | 'edit';

export const TTS_LANGUAGES = [
  'Auto', 'Chinese', 'English', 'Japanese', 'Korean', 'German', 'French', 'Russian', 'Portuguese', 'Spanish', 'Italian',
] as const;

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

/** fastvid_fast has no description in the spec. We serve it as fastvid sampled in 6 steps: the distilled
 * 8-step weights hold up well at 6, a quarter faster, and it needs no extra checkpoint (README: "Profiles"). */
export const VIDEO_PROFILES: ProfileInfo[] = [
  { profile: 'fastvid', kind: 'video', default_steps: 8, default: true, description: 'Distilled full model, best quality among the fast profiles', modes: ['t2v', 'i2v'], max_images: VIDEO_MAX_IMAGES, max_audios: VIDEO_MAX_AUDIOS, model: 'MiniMax H3' },
  { profile: 'turbo_int8', kind: 'video', default_steps: 8, default: false, description: 'Lightweight-adapter variant, slightly different style, similar speed', modes: ['t2v', 'i2v'], max_images: VIDEO_MAX_IMAGES, max_audios: VIDEO_MAX_AUDIOS, model: 'MiniMax H3' },
  { profile: 'fastvid_4step_int8', kind: 'video', default_steps: 4, default: false, description: 'Fastest, slightly softer detail', modes: ['t2v', 'i2v'], max_images: VIDEO_MAX_IMAGES, max_audios: VIDEO_MAX_AUDIOS, model: 'MiniMax H3' },
  { profile: 'fastvid_fast', kind: 'video', default_steps: 6, default: false, description: 'fastvid weights sampled in 6 steps: about a quarter faster, a little softer', modes: ['t2v', 'i2v'], max_images: VIDEO_MAX_IMAGES, max_audios: VIDEO_MAX_AUDIOS, model: 'MiniMax H3' },
  { profile: 'basevid50_sol', kind: 'video', default_steps: 50, default: false, description: 'Original 50-step model with attention and cache optimisations, best quality', modes: ['t2v', 'i2v'], max_images: VIDEO_MAX_IMAGES, max_audios: VIDEO_MAX_AUDIOS, model: 'MiniMax H3' },
  { profile: 'basevid50', kind: 'video', default_steps: 50, default: false, description: 'Original 50-step model, slow', modes: ['t2v', 'i2v'], max_images: VIDEO_MAX_IMAGES, max_audios: VIDEO_MAX_AUDIOS, model: 'MiniMax H3' },
];

export const IMAGE_PROFILES: ProfileInfo[] = [
  { profile: 'imgmain', kind: 'image', default_steps: 25, default: true, default_cfg: 1, can_edit: true, description: '8-bit integer quantised; text-to-image and editing; 25 default steps', modes: ['t2i', 'edit'], max_images: 10, max_audios: 0, model: 'Qwen-Image-2.1' },
  { profile: 'imgmain_bf16', kind: 'image', default_steps: 25, default: false, default_cfg: 1, can_edit: true, description: 'Full-precision variant of imgmain, roughly twice as slow', modes: ['t2i', 'edit'], max_images: 10, max_audios: 0, model: 'Qwen-Image-2.1' },
  { profile: 'imgart_turbo', kind: 'image', default_steps: 8, default: false, default_cfg: 1, can_edit: false, description: '8-step distilled, art-oriented; text-to-image and style references only, cannot edit', modes: ['t2i'], max_images: 3, max_audios: 0, model: 'Krea 2 Turbo' },
  { profile: 'imgart_turbo_int8', kind: 'image', default_steps: 8, default: false, default_cfg: 1, can_edit: false, description: '8-bit integer quantised variant of imgart_turbo', modes: ['t2i'], max_images: 3, max_audios: 0, model: 'Krea 2 Turbo' },
];

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
