// The spec's semantic rules for a video create request (HTTP 400 with a reason a user can act on). Types were already
// checked (422) by the DTO layer; here values are checked and defaults resolved, once: where a request becomes a job.
// The defaults, bounds and input rules are the capability table's (catalog/capabilities.ts). Pure: no I/O.
import { BadInputError } from '../common/errors';
import {
  VIDEO_AUDIO_MODES, VIDEO_DEFAULTS, VIDEO_IMAGE_MODES, VIDEO_PROFILES, VIDEO_SIZES, capabilitiesOf, effectiveImageMode, snapFrames,
  videoCountsProblem, videoInputsProblem, voiceAloneSpeech, voicesWithoutPicture, type LoraChoice, type ProfileInfo, type VideoAudioMode, type VideoImageMode,
} from '../catalog';
import { checkLanguage, checkPrompt, checkRefText, oneOf, promptAnd, resolveLoras, resolvePriority, resolveSeed, resolveSteps } from '../jobs/job-requests';

export interface VideoRequest {
  prompt?: string; profile?: string; aspect?: string; res?: string; seconds?: number; seed?: number; steps?: number;
  image_mode?: string; audio_mode?: string; tts_text?: string; tts_ref_text?: string; tts_language?: string;
  timeout?: number; priority?: number;
  /** LoRAs by name and scale (the array, or a form's JSON text); the LoRA library (src/loras/) finds and checks the files. */
  loras?: unknown;
  /** A saved voice (tts/voices.store.ts) in place of audios[0]; VideoService swaps it for its clip before drafting. */
  voice?: string;
}

export interface VideoDraft {
  prompt: string; profile: ProfileInfo; aspect: string; res: string; width: number; height: number; seconds: number;
  frames: number; seed: number; steps: number; image_mode: VideoImageMode; audio_mode: VideoAudioMode;
  tts_text: string; tts_ref_text: string; tts_language: string; mode: 't2v' | 'i2v'; priority: number;
  /** A voice without pictures: tts_text is the prompt's quoted dialogue, spoken in audios[0]'s voice (catalog/dialogue.ts). */
  voice_alone: boolean;
  /** By name and scale; the LoRA library (src/loras/) finds and checks the files. */
  loras: LoraChoice[];
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
  const loras = resolveLoras(r.loras, caps!.loras, profileName);
  const seconds = r.seconds ?? def.seconds;
  if (!Number.isFinite(seconds) || seconds < caps!.seconds.min || seconds > caps!.seconds.max) throw new BadInputError(`seconds must be from ${caps!.seconds.min} to ${caps!.seconds.max} (got ${seconds})`);
  const tooMany = videoCountsProblem(caps!, imageCount, audioCount);
  if (tooMany) throw new BadInputError(tooMany);
  const asked = oneOf('image_mode', r.image_mode ?? def.image_mode, VIDEO_IMAGE_MODES) as VideoImageMode;
  const audio_mode = oneOf('audio_mode', r.audio_mode ?? def.audio_mode, VIDEO_AUDIO_MODES) as VideoAudioMode;
  let tts_text = r.tts_text ?? def.tts_text;
  let inputs = { images: imageCount, audios: audioCount, audio_mode, tts_text: tts_text.trim() !== '' };
  const voice_alone = voicesWithoutPicture(caps!, inputs);
  if (voice_alone) {
    const speech = voiceAloneSpeech(prompt, audioCount);
    if ('problem' in speech) throw new BadInputError(speech.problem);
    tts_text = speech.text;
    inputs = { ...inputs, tts_text: true };
  }
  const problem = videoInputsProblem(caps!, inputs);
  if (problem) throw new BadInputError(problem);
  const image_mode = effectiveImageMode(caps!, asked, inputs);
  const [width, height] = VIDEO_SIZES[aspect][res];
  return {
    prompt, profile: profile!, aspect, res, width, height, seconds, frames: snapFrames(seconds),
    seed: resolveSeed(r.seed), steps: resolveSteps(r.steps, profile!), image_mode, audio_mode, tts_text,
    tts_ref_text: checkRefText(r.tts_ref_text, 'tts_ref_text'), tts_language: checkLanguage(r.tts_language, 'tts_language'),
    mode: imageCount > 0 ? 'i2v' : 't2v', priority: resolvePriority(r.priority), voice_alone, loras,
  };
}
