// What a request of each profile can carry: one capability table per profile, and the rules read from it.
//
// Every station on a request's path reads this file, and none writes a default, a bound or an input rule of its own:
// - the DTOs (422s) and so the OpenAPI document: field defaults, enums and bounds (video/video.dto.ts, image/image.dto.ts);
// - drafting (video/video.draft.ts, image/image.draft.ts, 400s): applies the defaults, once, where a request becomes a
//   job, and the input rules;
// - /api/config (health/health.service.ts): the profiles, the fields' choices and defaults the page's forms show;
// - the GPU worker (worker/profiles/*.ts): its `accepts` is `acceptsFor(entry, facts)`, the entry plus the run-time
//   facts only it knows (whether the Ref2VA weights are there), which JobsService.checkServed then holds jobs to;
// - a model's own input checks (models/minimax_h3/task.ts) assert what the rules here already guaranteed.
// README "API" links here for "what can a request of profile X carry".

import { CLIP_SECONDS, DEFAULT_PRIORITY, MAX_INPUT_BYTES, MAX_STEPS, TRACK_MAX_AUDIOS, VIDEO_MAX_AUDIOS, VIDEO_MAX_IMAGES, VOICES_TOTAL_S } from './limits';
import type { ImageMode, VideoMode } from './profiles';
import { EXPLICIT_SIZE, IMAGE_ASPECTS, IMAGE_RES, VIDEO_ASPECTS, VIDEO_REFERENCE_MAX_ASPECT, VIDEO_RES } from './sizes';
import { LORA_LIMITS } from './loras';
import { VIDEO_SECONDS } from './video';

export const TTS_LANGUAGES = [
  'Auto', 'Chinese', 'English', 'Japanese', 'Korean', 'German', 'French', 'Russian', 'Portuguese', 'Spanish', 'Italian',
] as const;

/** A video's image_mode: keyframes pinned to frames, or reference pictures (subjects and style). */
export const VIDEO_IMAGE_MODES = ['keyframe', 'reference'] as const;
export type VideoImageMode = (typeof VIDEO_IMAGE_MODES)[number];
/** A video's audio_mode: voices that speak the prompt's dialogue, or clip 1 as the soundtrack. */
export const VIDEO_AUDIO_MODES = ['voice', 'track'] as const;
export type VideoAudioMode = (typeof VIDEO_AUDIO_MODES)[number];

/** An image request's cfg: 0 (the profile's default) or from 1 to this. */
export const MAX_CFG = 20;

/** Seconds a waiting request (wait=true, GET /api/jobs/{id}?wait=true) waits when it names no timeout. */
export const WAIT_DEFAULT_S = { video: 600, image: 300, job: 600 } as const;

/** A video request's fields when absent (the spec's defaults). Drafting applies them, once; the DTOs document them.
 * seed -1: random; steps 0: the profile's default (its entry's steps.default). */
export const VIDEO_DEFAULTS = {
  profile: 'fastvid', aspect: '16:9', res: '480p', seconds: VIDEO_SECONDS.default, seed: -1, steps: 0,
  image_mode: 'keyframe', audio_mode: 'voice', tts_text: '', tts_ref_text: '', tts_language: 'Auto',
  priority: DEFAULT_PRIORITY, wait: false, timeout: WAIT_DEFAULT_S.video, callback_url: null,
} as const satisfies {
  aspect: (typeof VIDEO_ASPECTS)[number]; res: (typeof VIDEO_RES)[number]; image_mode: VideoImageMode; audio_mode: VideoAudioMode;
  tts_language: (typeof TTS_LANGUAGES)[number];
} & Record<string, unknown>;

/** An image request's fields when absent. cfg 0: the profile's default (its entry's default_cfg). */
export const IMAGE_DEFAULTS = {
  negative_prompt: '', profile: 'imgmain', aspect: '1:1', res: '1K', size: '', size_from_ref: false, seed: -1, steps: 0,
  cfg: 0, priority: DEFAULT_PRIORITY, wait: false, timeout: WAIT_DEFAULT_S.image, callback_url: null,
} as const satisfies { aspect: (typeof IMAGE_ASPECTS)[number]; res: (typeof IMAGE_RES)[number] } & Record<string, unknown>;

/** A speech request's fields when absent. */
export const TTS_DEFAULTS = { ref_text: '', language: 'Auto' } as const satisfies { language: (typeof TTS_LANGUAGES)[number] } & Record<string, unknown>;

/** Facts about a worker's weights that some rules depend on, known only at run time by the worker serving the
 * profile: `ref2va`, whether it has MiniMax H3's Ref2VA partition (reference pictures and voices). */
export type RuntimeFact = 'ref2va';
export const RUNTIME_FACTS: Record<RuntimeFact, string> = { ref2va: 'the Ref2VA weights' };

/** One video profile's capabilities: what a request of it can carry. */
export interface VideoCapabilities {
  kind: 'video';
  profile: string;
  /** The open model behind it (shared/spec/models.md). */
  model: string;
  description: string;
  defaults: typeof VIDEO_DEFAULTS;
  /** steps: 0 (or absent) means `default`; a request may ask 1 to `max`; the model runs `min` to `max`. */
  steps: { default: number; min: number; max: number };
  /** t2v without images, i2v with. */
  modes: readonly VideoMode[];
  aspects: typeof VIDEO_ASPECTS;
  res: typeof VIDEO_RES;
  seconds: { min: number; max: number };
  tts_languages: typeof TTS_LANGUAGES;
  images: {
    max: number;
    bytes: number;
    /** Each image_mode, and the run-time fact it needs (absent: none). */
    modes: { keyframe: { needs?: RuntimeFact }; reference: { needs: RuntimeFact; max_aspect: number } };
  };
  audios: {
    max: number;
    bytes: number;
    clip_seconds: { minS: number; maxS: number };
    modes: {
      /** Voices: Ref2VA audio references, which need a picture (upstream refuses audio-only); with pictures they make
       * the job a reference one (the spec: "in voice mode with images, the image mode switches to reference"). */
      voice: { max: number; needs: RuntimeFact; needs_picture: true; image_mode: 'reference'; total_s: typeof VOICES_TOTAL_S };
      /** Clip 1 is the soundtrack; no other clip has a meaning there. */
      track: { min: 1; max: number };
    };
  };
  /** tts_text: speech in the voice of audios[0] (a clip of at least `voice_min_s`) becomes the soundtrack, so the job
   * takes one clip, that voice. */
  tts_text: { voice_clips: 1; voice_min_s: number };
  loras: LoraCapabilities;
}

/** The LoRAs a request of the profile may name (catalog/loras.ts): at most `max`, each at a scale in `scale`;
 * `unsupported`, with max 0, says why none. */
export interface LoraCapabilities {
  max: number;
  scale: { min: number; max: number; default: number };
  unsupported?: string;
}

/** One image profile's capabilities. */
export interface ImageCapabilities {
  kind: 'image';
  profile: string;
  model: string;
  description: string;
  defaults: typeof IMAGE_DEFAULTS;
  steps: { default: number; min: number; max: number };
  /** cfg: 0 (or absent) means `default`; else 1 to `max`. */
  cfg: { default: number; max: number };
  /** t2i, and edit where the profile can edit (its images then are pictures to edit, else style references). */
  modes: readonly ImageMode[];
  can_edit: boolean;
  aspects: typeof IMAGE_ASPECTS;
  res: typeof IMAGE_RES;
  explicit_size: typeof EXPLICIT_SIZE;
  images: { max: number; bytes: number };
  audios: { max: 0 };
  loras: LoraCapabilities;
}

export type Capabilities = VideoCapabilities | ImageCapabilities;

const video = <P extends string>(profile: P, steps: number, description: string): VideoCapabilities & { profile: P } => ({
  kind: 'video', profile, model: 'MiniMax H3', description, defaults: VIDEO_DEFAULTS,
  // a 1-step request runs one forward (the smallest grid, [1, 0])
  steps: { default: steps, min: 1, max: MAX_STEPS },
  modes: ['t2v', 'i2v'], aspects: VIDEO_ASPECTS, res: VIDEO_RES, seconds: { min: VIDEO_SECONDS.min, max: VIDEO_SECONDS.max }, tts_languages: TTS_LANGUAGES,
  images: { max: VIDEO_MAX_IMAGES, bytes: MAX_INPUT_BYTES, modes: { keyframe: {}, reference: { needs: 'ref2va', max_aspect: VIDEO_REFERENCE_MAX_ASPECT } } },
  audios: {
    max: VIDEO_MAX_AUDIOS, bytes: MAX_INPUT_BYTES, clip_seconds: CLIP_SECONDS.video,
    modes: { voice: { max: VIDEO_MAX_AUDIOS, needs: 'ref2va', needs_picture: true, image_mode: 'reference', total_s: VOICES_TOTAL_S }, track: { min: 1, max: TRACK_MAX_AUDIOS } },
  },
  tts_text: { voice_clips: 1, voice_min_s: CLIP_SECONDS.speech.minS },
  // per-request LoRAs beside the DiT's linears (catalog/loras.ts h3LoraModules), as on the image profiles; the fixed
  // turbo adapters are merged at load apart from these (models/minimax_h3/transformer/adapter.ts)
  loras: LORA_LIMITS,
});

const image = (profile: string, model: 'Qwen-Image-2.1' | 'Krea 2 Turbo', steps: number, description: string): ImageCapabilities => {
  const canEdit = model === 'Qwen-Image-2.1';
  return {
    kind: 'image', profile, model, description, defaults: IMAGE_DEFAULTS,
    // Qwen-Image's flowMatchSchedule needs two grid points (one step stretches to 0/0 upstream); Krea 2's one step
    steps: { default: steps, min: canEdit ? 2 : 1, max: MAX_STEPS },
    cfg: { default: 1, max: MAX_CFG },
    modes: canEdit ? ['t2i', 'edit'] : ['t2i'], can_edit: canEdit, aspects: IMAGE_ASPECTS, res: IMAGE_RES, explicit_size: EXPLICIT_SIZE,
    // editing takes 1 to 10 pictures; Krea 2 Turbo 0 to 3 style references
    images: { max: canEdit ? 10 : 3, bytes: MAX_INPUT_BYTES },
    audios: { max: 0 },
    loras: LORA_LIMITS,
  };
};

/** fastvid_fast has no description in the spec. We serve it as fastvid sampled in 6 steps: the distilled
 * 8-step weights hold up well at 6, a quarter faster, and it needs no extra checkpoint (README: "Profiles"). */
export const VIDEO_CAPABILITIES = [
  video('fastvid', 8, 'Distilled full model, best quality among the fast profiles'),
  video('turbo_int8', 8, 'Lightweight-adapter variant, slightly different style, similar speed'),
  video('fastvid_4step_int8', 4, 'Fastest, slightly softer detail'),
  video('fastvid_fast', 6, 'fastvid weights sampled in 6 steps: about a quarter faster, a little softer'),
  video('basevid50_sol', 50, 'Original 50-step model with attention and cache optimisations, best quality'),
  video('basevid50', 50, 'Original 50-step model, slow'),
] as const satisfies readonly VideoCapabilities[];
/** The six video profiles' names, written once (above): a model's own table of them is keyed by this type. */
export type VideoProfileName = (typeof VIDEO_CAPABILITIES)[number]['profile'];

export const IMAGE_CAPABILITIES: readonly ImageCapabilities[] = [
  image('imgmain', 'Qwen-Image-2.1', 25, '8-bit integer quantised; text-to-image and editing; 25 default steps'),
  image('imgmain_bf16', 'Qwen-Image-2.1', 25, 'Full-precision variant of imgmain, roughly twice as slow'),
  image('imgart_turbo', 'Krea 2 Turbo', 8, '8-step distilled, art-oriented; text-to-image and style references only, cannot edit'),
  image('imgart_turbo_int8', 'Krea 2 Turbo', 8, '8-bit integer quantised variant of imgart_turbo'),
];

/** The capability table entry of (kind, profile), or undefined for a profile the catalog does not have. */
export function capabilitiesOf(kind: 'video', profile: string): VideoCapabilities | undefined;
export function capabilitiesOf(kind: 'image', profile: string): ImageCapabilities | undefined;
export function capabilitiesOf(kind: string, profile: string): Capabilities | undefined;
export function capabilitiesOf(kind: string, profile: string): Capabilities | undefined {
  const table: readonly Capabilities[] = kind === 'video' ? VIDEO_CAPABILITIES : kind === 'image' ? IMAGE_CAPABILITIES : [];
  return table.find((c) => c.profile === profile);
}

// ---- the input rules ----------------------------------------------------------------------------------------

/** The counts and modes of a video request, after its defaults. */
export interface VideoInputs {
  images: number;
  audios: number;
  audio_mode: VideoAudioMode;
  /** Whether tts_text is set (not blank). */
  tts_text: boolean;
}

/** Why a video request carries more images or audio clips than `c` takes in any mode, or undefined. */
export function videoCountsProblem(c: VideoCapabilities, images: number, audios: number): string | undefined {
  if (images > c.images.max) return `too many images: ${images} given, a video takes at most ${c.images.max}`;
  if (audios > c.audios.max) return `too many audios: ${audios} given, a video takes at most ${c.audios.max}`;
  return undefined;
}

/** Why a video request's clips do not fit its modes whatever the worker has, or undefined: drafting's 400s, in order. */
export function videoInputsProblem(c: VideoCapabilities, r: VideoInputs): string | undefined {
  if (r.tts_text && r.audios < c.tts_text.voice_clips) return 'tts_text needs a voice to speak in: give a reference clip as audios[0]';
  const track = c.audios.modes.track;
  if (r.audio_mode === 'track' && r.audios < track.min) return 'audio_mode track needs a soundtrack clip in audios';
  if (r.audio_mode === 'track' && r.audios > track.max) return `audios: audio_mode track takes ${track.max} clip (the soundtrack); ${r.audios} given`;
  if (voicesWithoutPicture(c, r)) {
    return 'audios: voices (audio_mode voice) need at least one picture in images, the people or scene that speaks (MiniMax H3 takes no voice reference alone); for a clip that is the soundtrack use audio_mode track';
  }
  return undefined;
}

/** Whether the clips are voices (audio_mode voice, no tts_text: with tts_text a clip is the speech's voice). */
export function hasVoices(r: Pick<VideoInputs, 'audios' | 'audio_mode' | 'tts_text'>): boolean {
  return r.audio_mode === 'voice' && r.audios > 0 && !r.tts_text;
}

/** "Voices need a picture": voices are Ref2VA audio references, which upstream never takes alone
 * (MiniMaxH3Ref2VASetupStep refuses audio-only). The one statement of the rule; drafting refuses what breaks it and
 * the model asserts it. */
export function voicesWithoutPicture(c: VideoCapabilities, r: Pick<VideoInputs, 'images' | 'audios' | 'audio_mode' | 'tts_text'>): boolean {
  return c.audios.modes.voice.needs_picture && hasVoices(r) && r.images === 0;
}

/** The image_mode a video job runs in: voices with pictures make it a reference job (the spec), else as asked. */
export function effectiveImageMode(c: VideoCapabilities, asked: VideoImageMode, r: VideoInputs): VideoImageMode {
  return hasVoices(r) && r.images > 0 ? c.audios.modes.voice.image_mode : asked;
}

// ---- what a worker accepts ----------------------------------------------------------------------------------

/** What a profile's pipeline can run, so the API refuses at creation what it would fail on (a 400, not a failed job).
 * The worker reports it at hello (worker/protocol.ts ServedSummary); `acceptsFor` builds it from the table. */
export interface Accepts {
  /** Steps (after the profile default is resolved). */
  steps: { min: number; max: number };
  /** Most input images / audio clips a job may carry (0: none). */
  images: number;
  audios: number;
  /** Video: the image_mode values it runs images in (absent: any); tts_text taken (absent: yes). */
  imageModes?: readonly VideoImageMode[];
  /** Video: the audio_mode values it runs audios in (absent: any). */
  audioModes?: readonly VideoAudioMode[];
  ttsText?: boolean;
  /** Why images, audios, an image or audio mode or tts_text are refused where the profile does not take them yet. */
  inputsNote?: string;
}

/** The run-time facts a worker knows of its weights: each true, or why not (a clause after the fact's name, e.g.
 * "which upstream publishes for the base release only, not for fastvid's"). */
export type RuntimeFacts = Record<RuntimeFact, true | { missing: string }>;

/** A worker's `accepts`: the table entry, narrowed by the run-time facts it alone knows. */
export function acceptsFor(c: VideoCapabilities, facts: RuntimeFacts): Accepts;
export function acceptsFor(c: ImageCapabilities): Accepts;
export function acceptsFor(c: Capabilities, facts?: RuntimeFacts): Accepts {
  if (c.kind === 'image') return { steps: { min: c.steps.min, max: c.steps.max }, images: c.images.max, audios: c.audios.max };
  const has = (need: RuntimeFact | undefined) => need === undefined || facts![need] === true;
  const imageModes = VIDEO_IMAGE_MODES.filter((m) => has(c.images.modes[m].needs));
  const audioModes = (['track', 'voice'] as const).filter((m) => m === 'track' || has(c.audios.modes[m].needs));
  const audios = Math.max(...audioModes.map((m) => c.audios.modes[m].max));
  const voice = c.audios.modes.voice;
  const keyframes = `keyframes (image_mode keyframe, 1 to ${c.images.max} images)`;
  const track = `a soundtrack (audio_mode track, ${c.audios.modes.track.max} clip) and speech as the soundtrack (tts_text, in the voice of audios[0])`;
  const ref2va = facts!.ref2va;
  const inputsNote = ref2va === true
    ? `text to video, ${keyframes}, reference pictures (image_mode reference, 1 to ${c.images.max}) with 0 to ${voice.max} voices (audio_mode voice) or a soundtrack, ${track} run`
    : `reference pictures and voices need ${RUNTIME_FACTS.ref2va}, ${ref2va.missing}; text to video, ${keyframes}, ${track} run`;
  return { steps: { min: c.steps.min, max: c.steps.max }, images: c.images.max, audios, imageModes, audioModes, ttsText: true, inputsNote };
}
