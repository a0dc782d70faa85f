// The spec's limits (service-api.md "Limits") and the ones this service chose where it is silent (README "API").

export const MAX_PROMPT_CHARS = 10_000;
/** ref_text (speech) and tts_ref_text (video): the transcript of a reference clip of at most 30 s (the spec is silent;
 * fast speech is about 1,000 characters in 30 s). */
export const MAX_REF_TEXT_CHARS = 2_000;
export const MAX_STEPS = 200;
export const MAX_SEED = 4294967295;
/** Job priorities (an extension of the spec): 0 to 9, higher first, first come first served within one. */
export const DEFAULT_PRIORITY = 5;
export const MAX_PRIORITY = 9;
/** Longest `timeout` of a waiting request, seconds. */
export const MAX_WAIT_S = 1800;
/** Largest input file (image or audio, upload or URL): 25 MiB. */
export const MAX_INPUT_BYTES = 25 * 1024 * 1024;
/** Images and audio clips a video request may carry. */
export const VIDEO_MAX_IMAGES = 6;
export const VIDEO_MAX_AUDIOS = 3;
/** Clips of a video in audio_mode track: clip 1 is the soundtrack, and no other clip has a meaning there (README). */
export const TRACK_MAX_AUDIOS = 1;
/** Clip lengths in seconds: a video job's audios[i], and the speech reference clip. */
export const CLIP_SECONDS = {
  video: { minS: 2, maxS: 15 },
  speech: { minS: 3, maxS: 30 },
} as const;
/** Voices of a video (audio_mode voice) together: at most 15 s (MiniMax H3's reference limit, "total video and audio
 * <= 15 s"), with the per-clip slack for codec padding (0.1 s). */
export const VOICES_TOTAL_S = { maxS: 15, toleranceS: 0.1 } as const;
