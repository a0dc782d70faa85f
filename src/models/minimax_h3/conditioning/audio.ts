// The audio a video job brings, read before any model loads (a file that is not audio fails there) and encoded after
// the text encoder is freed (docs/models/minimax-h3.md "Tracks", "Voices" and "Soundtracks with reference pictures"):
//   track   audio_mode track's clip, or tts_text's speech: fitted to the video at 32 kHz stereo (track-inputs.ts) and
//           muxed unchanged; on FL2VA (text, keyframes) it is also the audio guide at frame 0 (encodeTrack);
//   voices  audio_mode voice with reference pictures: Ref2VA audio blocks after the pictures (voice-inputs.ts);
//   a soundtrack with reference pictures (Ref2VA): the clip is muxed unchanged as above, and the model gets it as
//           <Audio 1>, an audio reference prepared as a voice is, defined in the prompt as `fully_copy` (upstream's
//           only documented form of a given soundtrack, h3-conditioning.md 4; catalog soundtrackDefinition).
import type { Engine } from '../../../engine/engine';
import { encodeTrack, readTrack, type Track } from './track-inputs';
import { voicePaths, type H3Task } from '../task';
import { encodeVoices, readVoices, voiceRows, type EncodedVoice, type Voice } from './voice-inputs';

export interface AudioInputs {
  /** What the mp4 carries instead of decoded audio (null: the generated audio is decoded). */
  track: Track | null;
  /** Ref2VA audio references in request order: the voices, or the soundtrack as <Audio 1>. */
  voices: Voice[];
}

/** The job's conditioning audio rows: a track's guide rows [2 Na, A] (FL2VA), or the voices' rows one after the
 * other (Ref2VA), each clean; `encoded` per voice for the packed layout's blocks. */
export interface EncodedAudioInputs {
  rows: Float32Array;
  encoded: EncodedVoice[];
}

/** Whether the job's soundtrack (a track clip or tts_text's speech) is also a Ref2VA audio reference: it is when
 * the job has reference pictures. */
export function soundtrackIsReference(task: Pick<H3Task, 'images' | 'imageMode' | 'audios' | 'audioMode' | 'speech'>): boolean {
  const soundtrack = !!task.speech || (task.audioMode === 'track' && task.audios.length > 0);
  return soundtrack && task.images.length > 0 && task.imageMode === 'reference';
}

/** The audio labels (<Audio j>) the job's text shows: the voices, or 1 for a soundtrack that is a reference. */
export function audioReferenceCount(task: Pick<H3Task, 'images' | 'imageMode' | 'audios' | 'audioMode' | 'speech'>): number {
  return soundtrackIsReference(task) ? 1 : voicePaths(task).length;
}

/** Reads the clips the task names (a spoken track is added later: withSpeech). */
export async function readAudioInputs(task: H3Task, signal?: AbortSignal): Promise<AudioInputs> {
  const clip = task.audioMode === 'track' && !task.speech ? task.audios[0] : undefined;
  const track = clip ? await readTrack(clip, task.frames, signal) : null;
  const refs = clip && soundtrackIsReference(task) ? [clip] : voicePaths(task);
  return { track, voices: await readVoices(refs, task.frames, signal) };
}

/** The job's audio once tts_text's speech is made (a wav at `spoken`): the track, and with reference pictures the
 * reference too. */
export async function withSpeech(task: H3Task, spoken: string, signal?: AbortSignal): Promise<AudioInputs> {
  const track = await readTrack(spoken, task.frames, signal);
  return { track, voices: soundtrackIsReference(task) ? await readVoices([spoken], task.frames, signal) : [] };
}

/** Encodes the conditioning audio with the checkpoint's audio VAE encoder (loaded for it and freed): the voices
 * (references), else the track's guide rows cropped to the target's `audioLatents`. */
export async function encodeAudioInputs(e: Engine, audioVaeDir: string, audio: AudioInputs, audioLatents: number, signal?: AbortSignal): Promise<EncodedAudioInputs> {
  if (audio.voices.length) {
    const encoded = await encodeVoices(e, audioVaeDir, audio.voices, signal);
    return { rows: voiceRows(encoded), encoded };
  }
  if (audio.track) return { rows: await encodeTrack(e, audioVaeDir, audio.track, audioLatents), encoded: [] };
  return { rows: new Float32Array(0), encoded: [] };
}
