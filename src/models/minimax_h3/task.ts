// One MiniMax H3 video job as the pipeline takes it (H3Task), made from the worker's video task by h3TaskOf, which
// inputs the pipeline runs (checkInputs) and the job's latent geometry (jobGeometry).
import { hasVoices, VIDEO_CAPABILITIES, VIDEO_DEFAULTS, voicesWithoutPicture, type VideoParams, type VideoTask } from '../../catalog';
import { BadInputError } from '../../common/errors';
import type { RunContext } from '../common/pipeline';
import { resolveGeometry, type Geometry } from './sequence/packed-sequence';

/** The capability table's entries of this model's profiles (catalog/capabilities.ts): their input limits and rules are
 * the same for all six. */
const H3_INPUTS = VIDEO_CAPABILITIES.find((c) => c.model === 'MiniMax H3')!;

/** At most this many voices (upstream's max_audios, the contract's 3 clips): the table's. */
export const MAX_VOICES = H3_INPUTS.audios.modes.voice.max;

/** What one video job asks for (h3TaskOf makes it from the worker's task). The worker's params it takes as they are:
 * `seed` (u32; the noise is a function of it, h3Noise, so the same task gives the same clip), `steps` (as the profile
 * counts them: grid points or model evaluations, sigmas.ts H3StepCount), `width` and `height` (pixels, the catalog's
 * size table), `frames` (on the 17k + 5 grid, the catalog's snapFrames). */
export interface H3Task extends Pick<VideoParams, 'prompt' | 'seed' | 'steps' | 'width' | 'height' | 'frames'> {
  /** Image files in request order: keyframes (mode i2v, 1 to 6) when imageMode is 'keyframe' (the default), reference
   * pictures (1 to 6, the Ref2VA partition, no soundtrack) when it is 'reference'. */
  images: string[];
  imageMode?: VideoParams['image_mode'];
  /** Audio files: one soundtrack clip in audioMode 'track' (held as audio conditioning and muxed unchanged), or 1 to 3
   * voices in audioMode 'voice' (the default) with reference pictures: Ref2VA audio references (voice-inputs.ts). */
  audios: string[];
  audioMode?: VideoParams['audio_mode'];
  /** A spoken soundtrack (tts_text): makes an audio file inside 编码提示词/图片, after the text encoder is freed and
   * before anything of the sampling is allocated, having freed whatever GPU memory it took; the file is then the
   * track, read exactly as audios[0] of an audio_mode track job (32 kHz stereo, cut or padded to the video). The
   * worker composes it from the speech model (src/worker/profiles/video-speech.ts), so this model imports no other.
   * Its progress is reported as the stage's progress; its own stages are not. With it, `audios` is empty. */
  speech?(ctx: RunContext): Promise<string>;
  /** mp4, written through a temp name. */
  outputPath: string;
}

/** The worker's video task (catalog/tasks.ts) as this model's. A tts_text task gives `speech` (the worker composes it
 * from the speech model: src/worker/profiles/video-speech.ts spokenTrack): the speech is the soundtrack (track mode
 * whatever audio_mode says), and audios[0] only its voice, so the model is given no clip. */
export function h3TaskOf(t: VideoTask, speech?: H3Task['speech']): H3Task {
  const p = t.params;
  const base = { prompt: p.prompt, seed: p.seed, steps: p.steps, width: p.width, height: p.height, frames: p.frames, images: t.images, imageMode: p.image_mode, outputPath: t.output };
  return speech ? { ...base, audios: [], audioMode: 'track', speech } : { ...base, audios: t.audios, audioMode: p.audio_mode };
}

/** What the pipeline runs: text alone, 1 to 6 keyframes (image_mode keyframe), a soundtrack (audio_mode track, 1 clip,
 * or a spoken one from task.speech and no clip) with or without them, 1 to 6 reference pictures (image_mode reference)
 * with 0 to 3 voices (audio_mode voice) or a soundtrack. The service's capability table guaranteed all of it before the
 * task was made (drafting, and the worker's accepts at creation); these are assertions of that table's limits and
 * rules, so a direct caller (a test, a bench, the planner) is refused before sampling with the same reasons. */
export function checkInputs(task: Pick<H3Task, 'images' | 'imageMode' | 'audios' | 'audioMode' | 'speech'>): void {
  if (task.speech && task.audios.length) throw new BadInputError('MiniMax H3: a spoken soundtrack (tts_text) is the only audio of the job; its voice goes to the speech model, not here');
  if (task.speech) return checkImages(task);
  const inputs = { images: task.images.length, audios: task.audios.length, audio_mode: task.audioMode ?? VIDEO_DEFAULTS.audio_mode, tts_text: false };
  if (hasVoices(inputs)) {
    const voice = H3_INPUTS.audios.modes.voice;
    if (voicesWithoutPicture(H3_INPUTS, inputs) || task.imageMode !== voice.image_mode) throw new BadInputError('MiniMax H3: voices (audio_mode voice) need at least one reference picture (image_mode reference): upstream\'s Ref2VA takes no audio reference alone');
    if (task.audios.length > voice.max) throw new BadInputError(`MiniMax H3: ${task.audios.length} voices given, at most ${voice.max}`);
  }
  const track = H3_INPUTS.audios.modes.track;
  if (task.audioMode === 'track' && task.audios.length !== track.max) throw new BadInputError(`MiniMax H3: audio_mode track takes ${track.max} clip (the soundtrack), ${task.audios.length} given`);
  checkImages(task);
}

/** The job's voices (audio_mode voice with reference pictures: checkInputs), else none. */
export function voicePaths(task: Pick<H3Task, 'audios' | 'audioMode' | 'speech'>): string[] {
  return !task.speech && task.audioMode !== 'track' ? task.audios : [];
}

function checkImages(task: Pick<H3Task, 'images' | 'imageMode' | 'audios' | 'audioMode' | 'speech'>): void {
  const reference = task.imageMode === 'reference';
  const max = H3_INPUTS.images.max;
  if (task.images.length > max) throw new BadInputError(`MiniMax H3: ${task.images.length} ${reference ? 'reference pictures' : 'keyframes'} given, at most ${max}`);
}

/** The job's latent geometry; its frame count must already be on the 17k + 5 grid (the service snaps it). */
export function jobGeometry(frames: number | undefined, height: number, width: number, patch: readonly [number, number, number]): Geometry {
  if (frames === undefined) throw new Error('MiniMax H3: the job has no frame count');
  const geo = resolveGeometry(frames, height, width, patch);
  if (geo.numFrames !== frames) throw new RangeError(`MiniMax H3: ${frames} frames is not on the model's 17k + 5 grid (next: ${geo.numFrames})`);
  return geo;
}
