// The spec's semantic rules for create requests (HTTP 400 with a reason a user can act on). Types were already
// checked (422) by the DTO layer; here values are checked and defaults resolved, once: where a request becomes a job.
// The defaults, bounds and input rules are the capability table's (catalog/capabilities.ts). Pure: no I/O.
import { randomInt } from 'node:crypto';
import { BadInputError } from '../common/errors';
import {
  DEFAULT_PRIORITY, IMAGE_DEFAULTS, IMAGE_PROFILES, IMAGE_SIZES, MAX_PRIORITY, MAX_PROMPT_CHARS, MAX_REF_TEXT_CHARS, MAX_SEED, MAX_STEPS, MAX_WAIT_S,
  ProfileInfo, TTS_DEFAULTS, TTS_LANGUAGES, VIDEO_AUDIO_MODES, VIDEO_DEFAULTS, VIDEO_IMAGE_MODES, VIDEO_PROFILES, VIDEO_SIZES, aspectOf, capabilitiesOf,
  effectiveImageMode, snapFrames, videoCountsProblem, videoInputsProblem, type VideoAudioMode, type VideoImageMode,
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
  const t = text ?? TTS_DEFAULTS.ref_text;
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
  return oneOf(field, language ?? TTS_DEFAULTS.language, TTS_LANGUAGES, field);
}

export interface VideoDraft {
  prompt: string; profile: ProfileInfo; aspect: string; res: string; width: number; height: number; seconds: number;
  frames: number; seed: number; steps: number; image_mode: VideoImageMode; audio_mode: VideoAudioMode;
  tts_text: string; tts_ref_text: string; tts_language: string; mode: 't2v' | 'i2v'; priority: number;
}

/** Video create rules, given how many images and audio clips came with the request. */
export function draftVideo(r: VideoRequest, imageCount: number, audioCount: number): VideoDraft {
  return promptAnd(() => checkPrompt(r.prompt), (prompt) => videoDraft(r, imageCount, audioCount, prompt));
}

function videoDraft(r: VideoRequest, imageCount: number, audioCount: number, prompt: string): VideoDraft {
  const def = VIDEO_DEFAULTS;
  const profileName = r.profile ?? def.profile;
  const profile = VIDEO_PROFILES.find((p) => p.profile === profileName);
  const caps = capabilitiesOf('video', profileName);
  if (!profile || !caps) oneOf('profile', profileName, VIDEO_PROFILES.map((p) => p.profile), 'video profile');
  const aspect = oneOf('aspect', r.aspect ?? def.aspect, caps!.aspects);
  const res = oneOf('res', r.res ?? def.res, caps!.res);
  const seconds = r.seconds ?? def.seconds;
  if (!Number.isFinite(seconds) || seconds < caps!.seconds.min || seconds > caps!.seconds.max) throw new BadInputError(`seconds must be from ${caps!.seconds.min} to ${caps!.seconds.max} (got ${seconds})`);
  const tooMany = videoCountsProblem(caps!, imageCount, audioCount);
  if (tooMany) throw new BadInputError(tooMany);
  const asked = oneOf('image_mode', r.image_mode ?? def.image_mode, VIDEO_IMAGE_MODES) as VideoImageMode;
  const audio_mode = oneOf('audio_mode', r.audio_mode ?? def.audio_mode, VIDEO_AUDIO_MODES) as VideoAudioMode;
  const tts_text = r.tts_text ?? def.tts_text;
  const inputs = { images: imageCount, audios: audioCount, audio_mode, tts_text: tts_text.trim() !== '' };
  const problem = videoInputsProblem(caps!, inputs);
  if (problem) throw new BadInputError(problem);
  const image_mode = effectiveImageMode(caps!, asked, inputs);
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
  const def = IMAGE_DEFAULTS;
  const profileName = r.profile ?? def.profile;
  const profile = IMAGE_PROFILES.find((p) => p.profile === profileName);
  const caps = capabilitiesOf('image', profileName);
  if (!profile || !caps) oneOf('profile', profileName, IMAGE_PROFILES.map((p) => p.profile), 'image profile');
  let aspect = oneOf('aspect', r.aspect ?? def.aspect, caps!.aspects);
  let res = oneOf('res', r.res ?? def.res, caps!.res);
  if (imageCount > profile!.max_images) {
    throw new BadInputError(profile!.can_edit
      ? `too many images: ${imageCount} given, ${profile!.profile} takes at most ${profile!.max_images}`
      : `too many images: ${imageCount} given, ${profile!.profile} takes at most ${profile!.max_images} style references`);
  }
  const size_from_ref = r.size_from_ref ?? def.size_from_ref;
  const size = (r.size ?? def.size).trim();
  let [width, height] = IMAGE_SIZES[aspect][res];
  if (size !== '') {
    const m = /^(\d+)x(\d+)$/.exec(size);
    if (!m) throw new BadInputError(`size must be <width>x<height>, e.g. 1280x720 (got ${JSON.stringify(r.size)})`);
    [width, height] = [Number(m[1]), Number(m[2])];
    for (const [side, v] of [['width', width], ['height', height]] as const) {
      const { multiple_of: m, min, max } = caps!.explicit_size;
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
  const cfgIn = r.cfg ?? def.cfg;
  const cfg = caps!.cfg;
  if (!Number.isFinite(cfgIn) || cfgIn < 0 || (cfgIn > 0 && cfgIn < 1) || cfgIn > cfg.max) throw new BadInputError(`cfg must be 0 (profile default, ${cfg.default}) or from 1 to ${cfg.max} (got ${cfgIn})`);
  return {
    prompt, negative: r.negative_prompt ?? def.negative_prompt, profile: profile!, aspect, res, width, height, size_from_ref,
    seed: resolveSeed(r.seed), steps: resolveSteps(r.steps, profile!), cfg: cfgIn === 0 ? cfg.default : cfgIn,
    // Style references (imgart_turbo with images) keep mode t2i: the content is not edited, only the look guided.
    mode: imageCount > 0 && profile!.can_edit ? 'edit' : 't2i',
    priority: resolvePriority(r.priority),
  };
}
