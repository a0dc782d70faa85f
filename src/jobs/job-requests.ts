// The spec's semantic rules for create requests (HTTP 400 with a reason a user can act on). Types were already
// checked (422) by the DTO layer; here values are checked and defaults resolved. Pure: no I/O.
import { randomInt } from 'node:crypto';
import { BadInputError } from '../common/errors';
import {
  DEFAULT_PRIORITY, EXPLICIT_SIZE, IMAGE_ASPECTS, IMAGE_PROFILES, IMAGE_RES, IMAGE_SIZES, MAX_PRIORITY, MAX_PROMPT_CHARS, MAX_REF_TEXT_CHARS, MAX_SEED, MAX_STEPS, MAX_WAIT_S,
  ProfileInfo, TRACK_MAX_AUDIOS, TTS_LANGUAGES, VIDEO_ASPECTS, VIDEO_PROFILES, VIDEO_RES, VIDEO_SECONDS, VIDEO_SIZES, aspectOf, snapFrames,
} from '../catalog';

export interface VideoRequest {
  prompt?: string; profile?: string; aspect?: string; res?: string; seconds?: number; seed?: number; steps?: number;
  image_mode?: string; audio_mode?: string; tts_text?: string; tts_ref_text?: string; tts_language?: string;
  timeout?: number; priority?: number;
}

export interface ImageRequest {
  prompt?: string; negative_prompt?: string; profile?: string; aspect?: string; res?: string; size?: string;
  size_from_ref?: boolean; seed?: number; steps?: number; cfg?: number; timeout?: number; priority?: number;
}

function oneOf(field: string, value: string, allowed: readonly string[], what = field): string {
  if (!allowed.includes(value)) throw new BadInputError(`unknown ${what} ${JSON.stringify(value)}; use one of: ${allowed.join(', ')}`);
  return value;
}

export function checkPrompt(prompt: string | undefined, field = 'prompt'): string {
  if (prompt === undefined || prompt.trim() === '') throw new BadInputError(`${field} is empty; say what to make`);
  if (prompt.length > MAX_PROMPT_CHARS) throw new BadInputError(`${field} is ${prompt.length} characters long; the limit is ${MAX_PROMPT_CHARS}`);
  return prompt;
}

/** Checks the prompt, then the rest: a blank prompt does not hide a problem elsewhere. Both reasons come in one 400,
 * a line each (the page flags each field at once). */
function promptAnd<T>(check: () => string, rest: (prompt: string) => T): T {
  let prompt = '';
  let problem: BadInputError | undefined;
  try {
    prompt = check();
  } catch (err) {
    if (!(err instanceof BadInputError)) throw err;
    problem = err;
  }
  let out: T;
  try {
    out = rest(prompt);
  } catch (err) {
    if (problem && err instanceof BadInputError) throw new BadInputError(`${problem.message}\n${err.message}`);
    throw err;
  }
  if (problem) throw problem;
  return out;
}

/** A reference clip's transcript (ref_text, tts_ref_text): optional, and bounded like the prompt. */
export function checkRefText(text: string | undefined, field: string): string {
  const t = text ?? '';
  if (t.length > MAX_REF_TEXT_CHARS) throw new BadInputError(`${field} is ${t.length} characters long; the limit is ${MAX_REF_TEXT_CHARS} (the transcript of a reference clip of at most 30 s)`);
  return t;
}

export function resolveSeed(seed: number | undefined): number {
  if (seed === undefined || seed === -1) return randomInt(0, 2 ** 31);
  if (!Number.isInteger(seed) || seed < 0 || seed > MAX_SEED) throw new BadInputError(`seed must be -1 (random) or a whole number from 0 to ${MAX_SEED} (got ${seed})`);
  return seed;
}

export function resolveSteps(steps: number | undefined, profile: ProfileInfo): number {
  if (steps === undefined || steps === 0) return profile.default_steps;
  if (!Number.isInteger(steps) || steps < 1 || steps > MAX_STEPS) throw new BadInputError(`steps must be 0 (profile default, ${profile.default_steps}) or from 1 to ${MAX_STEPS} (got ${steps})`);
  return steps;
}

export function resolvePriority(priority: number | undefined): number {
  if (priority === undefined) return DEFAULT_PRIORITY;
  if (!Number.isInteger(priority) || priority < 0 || priority > MAX_PRIORITY) throw new BadInputError(`priority must be a whole number from 0 to ${MAX_PRIORITY} (got ${priority}); higher runs first, ${DEFAULT_PRIORITY} by default`);
  return priority;
}

export function checkTimeout(timeout: number | undefined, def: number): number {
  if (timeout === undefined) return def;
  if (!Number.isInteger(timeout) || timeout < 0 || timeout > MAX_WAIT_S) throw new BadInputError(`timeout must be a whole number of seconds from 0 to ${MAX_WAIT_S} (got ${timeout})`);
  return timeout;
}

export function checkLanguage(language: string | undefined, field: string): string {
  return oneOf(field, language ?? 'Auto', TTS_LANGUAGES, field);
}

export interface VideoDraft {
  prompt: string; profile: ProfileInfo; aspect: string; res: string; width: number; height: number; seconds: number;
  frames: number; seed: number; steps: number; image_mode: 'keyframe' | 'reference'; audio_mode: 'voice' | 'track';
  tts_text: string; tts_ref_text: string; tts_language: string; mode: 't2v' | 'i2v'; priority: number;
}

/** Video create rules, given how many images and audio clips came with the request. */
export function draftVideo(r: VideoRequest, imageCount: number, audioCount: number): VideoDraft {
  return promptAnd(() => checkPrompt(r.prompt), (prompt) => videoDraft(r, imageCount, audioCount, prompt));
}

function videoDraft(r: VideoRequest, imageCount: number, audioCount: number, prompt: string): VideoDraft {
  const profileName = r.profile ?? 'fastvid';
  const profile = VIDEO_PROFILES.find((p) => p.profile === profileName);
  if (!profile) oneOf('profile', profileName, VIDEO_PROFILES.map((p) => p.profile), 'video profile');
  const aspect = oneOf('aspect', r.aspect ?? '16:9', VIDEO_ASPECTS);
  const res = oneOf('res', r.res ?? '480p', VIDEO_RES);
  const seconds = r.seconds ?? VIDEO_SECONDS.default;
  if (!Number.isFinite(seconds) || seconds < VIDEO_SECONDS.min || seconds > VIDEO_SECONDS.max) throw new BadInputError(`seconds must be from ${VIDEO_SECONDS.min} to ${VIDEO_SECONDS.max} (got ${seconds})`);
  if (imageCount > profile!.max_images) throw new BadInputError(`too many images: ${imageCount} given, a video takes at most ${profile!.max_images}`);
  if (audioCount > profile!.max_audios) throw new BadInputError(`too many audios: ${audioCount} given, a video takes at most ${profile!.max_audios}`);
  let image_mode = oneOf('image_mode', r.image_mode ?? 'keyframe', ['keyframe', 'reference']) as 'keyframe' | 'reference';
  const audio_mode = oneOf('audio_mode', r.audio_mode ?? 'voice', ['voice', 'track']) as 'voice' | 'track';
  const tts_text = r.tts_text ?? '';
  if (tts_text.trim() !== '' && audioCount === 0) throw new BadInputError('tts_text needs a voice to speak in: give a reference clip as audios[0]');
  if (audio_mode === 'track' && audioCount === 0) throw new BadInputError('audio_mode track needs a soundtrack clip in audios');
  if (audio_mode === 'track' && audioCount > TRACK_MAX_AUDIOS) throw new BadInputError(`audios: audio_mode track takes ${TRACK_MAX_AUDIOS} clip (the soundtrack); ${audioCount} given`);
  // voices are Ref2VA audio references, which upstream never takes alone (MiniMaxH3Ref2VASetupStep refuses audio-only)
  if (audio_mode === 'voice' && audioCount > 0 && imageCount === 0 && tts_text.trim() === '') {
    throw new BadInputError('audios: voices (audio_mode voice) need at least one picture in images, the people or scene that speaks (MiniMax H3 takes no voice reference alone); for a clip that is the soundtrack use audio_mode track');
  }
  // The spec: in voice mode with images, the image mode switches to reference.
  if (audio_mode === 'voice' && audioCount > 0 && imageCount > 0 && tts_text.trim() === '') image_mode = 'reference';
  const [width, height] = VIDEO_SIZES[aspect][res];
  return {
    prompt, profile: profile!, aspect, res, width, height, seconds, frames: snapFrames(seconds),
    seed: resolveSeed(r.seed), steps: resolveSteps(r.steps, profile!), image_mode, audio_mode, tts_text,
    tts_ref_text: checkRefText(r.tts_ref_text, 'tts_ref_text'), tts_language: checkLanguage(r.tts_language, 'tts_language'),
    mode: imageCount > 0 ? 'i2v' : 't2v', priority: resolvePriority(r.priority),
  };
}

export interface ImageDraft {
  prompt: string; negative: string; profile: ProfileInfo; aspect: string; res: string; width: number; height: number;
  size_from_ref: boolean; seed: number; steps: number; cfg: number; mode: 't2i' | 'edit'; priority: number;
}

/** Image create rules. With size_from_ref the size is set later, from the first image (see sizeForTier). */
export function draftImage(r: ImageRequest, imageCount: number): ImageDraft {
  return promptAnd(() => checkPrompt(r.prompt), (prompt) => imageDraft(r, imageCount, prompt));
}

function imageDraft(r: ImageRequest, imageCount: number, prompt: string): ImageDraft {
  const profileName = r.profile ?? 'imgmain';
  const profile = IMAGE_PROFILES.find((p) => p.profile === profileName);
  if (!profile) oneOf('profile', profileName, IMAGE_PROFILES.map((p) => p.profile), 'image profile');
  let aspect = oneOf('aspect', r.aspect ?? '1:1', IMAGE_ASPECTS);
  let res = oneOf('res', r.res ?? '1K', IMAGE_RES);
  if (imageCount > profile!.max_images) {
    throw new BadInputError(profile!.can_edit
      ? `too many images: ${imageCount} given, ${profile!.profile} takes at most ${profile!.max_images}`
      : `too many images: ${imageCount} given, ${profile!.profile} takes at most ${profile!.max_images} style references`);
  }
  const size_from_ref = r.size_from_ref ?? false;
  const size = (r.size ?? '').trim();
  let [width, height] = IMAGE_SIZES[aspect][res];
  if (size !== '') {
    const m = /^(\d+)x(\d+)$/.exec(size);
    if (!m) throw new BadInputError(`size must be <width>x<height>, e.g. 1280x720 (got ${JSON.stringify(r.size)})`);
    [width, height] = [Number(m[1]), Number(m[2])];
    for (const [side, v] of [['width', width], ['height', height]] as const) {
      const { multiple_of: m, min, max } = EXPLICIT_SIZE;
      if (v % m !== 0 || v < min || v > max) throw new BadInputError(`size: ${side} ${v} must be a multiple of ${m} from ${min} to ${max}`);
    }
    if (size_from_ref) throw new BadInputError('give either size or size_from_ref, not both');
    aspect = aspectOf(width, height);
    res = 'custom';
  }
  if (size_from_ref) {
    if (!profile!.can_edit) {
      const editors = IMAGE_PROFILES.filter((p) => p.can_edit).map((p) => p.profile).join(' and ');
      throw new BadInputError(`size_from_ref is for editing; ${profile!.profile} cannot edit (its images are style references): ${editors} edit`);
    }
    if (imageCount === 0) throw new BadInputError('size_from_ref needs at least one image to take the size from');
  }
  const cfgIn = r.cfg ?? 0;
  if (!Number.isFinite(cfgIn) || cfgIn < 0 || (cfgIn > 0 && cfgIn < 1) || cfgIn > 20) throw new BadInputError(`cfg must be 0 (profile default, ${profile!.default_cfg}) or from 1 to 20 (got ${cfgIn})`);
  return {
    prompt, negative: r.negative_prompt ?? '', profile: profile!, aspect, res, width, height, size_from_ref,
    seed: resolveSeed(r.seed), steps: resolveSteps(r.steps, profile!), cfg: cfgIn === 0 ? profile!.default_cfg! : cfgIn,
    // Style references (imgart_turbo with images) keep mode t2i: the content is not edited, only the look guided.
    mode: imageCount > 0 && profile!.can_edit ? 'edit' : 't2i',
    priority: resolvePriority(r.priority),
  };
}
