// OpenAI's speech (POST /v1/audio/speech) and saved voices: a speech request names a saved voice, whose clip goes
// through Kiln's own speech path (TtsService.speak: the same checks and queue), and the wav it makes is re-encoded
// by ffmpeg to the asked format and tempo.
import { Injectable } from '@nestjs/common';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buffer } from 'node:stream/consumers';
import { CLIP_SECONDS, TTS_PROFILE } from '../catalog';
import { BadInputError, NotFoundError, UnavailableError } from '../common/errors';
import { checkPrompt } from '../jobs/job-requests';
import type { InputFile } from '../jobs/input-probe';
import { JobFiles } from '../jobs/job.files';
import { JobInputs } from '../jobs/job.inputs';
import { BASE_ARGS, runFfmpeg } from '../media/ffmpeg';
import { TtsService } from '../tts/tts.service';
import type { OpenAiSpeechDto, SpeechFormat } from './speech.dto';
import { VoiceStore, type SavedVoice } from '../tts/voices.store';

export const OPENAI_SPEECH_MODELS = ['tts-1', 'tts-1-hd', 'gpt-4o-mini-tts'] as const;

const ENCODE: Record<SpeechFormat, { args: string[]; type: string }> = {
  mp3: { args: ['-c:a', 'libmp3lame', '-f', 'mp3'], type: 'audio/mpeg' },
  opus: { args: ['-c:a', 'libopus', '-f', 'ogg'], type: 'audio/ogg' },
  aac: { args: ['-c:a', 'aac', '-f', 'adts'], type: 'audio/aac' },
  flac: { args: ['-c:a', 'flac', '-f', 'flac'], type: 'audio/flac' },
  wav: { args: ['-c:a', 'pcm_s16le', '-f', 'wav'], type: 'audio/wav' },
  pcm: { args: ['-c:a', 'pcm_s16le', '-ar', '24000', '-ac', '1', '-f', 's16le'], type: 'audio/pcm' },
};

/** ffmpeg's atempo takes 0.5 to 2 per stage in every version: a chain reaches 0.25 to 4. */
export function tempoChain(speed: number): string {
  const parts: number[] = [];
  let s = speed;
  while (s < 0.5) { parts.push(0.5); s /= 0.5; }
  while (s > 2) { parts.push(2); s /= 2; }
  parts.push(s);
  return parts.map((p) => `atempo=${p}`).join(',');
}

/** Audio bytes per speech.audio.delta event (before base64). */
export const SSE_CHUNK_BYTES = 16 * 1024;
/** Qwen3-TTS-12Hz's codec: one code frame per 1920 samples at 24 kHz. */
const SPEECH_CODEC_HZ = 12.5;

/** A PCM wav's length in seconds, from its fmt and data chunks (0 when it has none). */
export function wavSeconds(wav: Buffer): number {
  let rate = 0, blockAlign = 0;
  for (let at = 12; at + 8 <= wav.length; ) {
    const id = wav.toString('latin1', at, at + 4);
    const size = wav.readUInt32LE(at + 4);
    if (id === 'fmt ' && at + 20 <= wav.length) { rate = wav.readUInt32LE(at + 12); blockAlign = wav.readUInt16LE(at + 20); }
    if (id === 'data') return rate && blockAlign ? Math.min(size, wav.length - at - 8) / blockAlign / rate : 0;
    at += 8 + size + (size & 1);
  }
  return 0;
}

const sseData = (event: object) => `data: ${JSON.stringify(event)}\n\n`;

export const voiceObject = (v: SavedVoice) => ({ id: v.id, object: 'audio.voice', created_at: v.created_at, name: v.name, type: 'audio_sample' });

@Injectable()
export class OpenAiSpeechService {
  constructor(
    private readonly tts: TtsService,
    private readonly inputs: JobInputs,
    private readonly files: JobFiles,
    readonly voices: VoiceStore,
  ) {}

  async saveVoice(name: string, consent: string, clip: InputFile | undefined, refText?: string): Promise<SavedVoice> {
    if (!name.trim()) throw new BadInputError('name is empty; give the voice a name to use it by');
    if (!clip) throw new BadInputError('audio_sample: no clip; send the voice\'s recording (3 to 30 s) as the audio_sample file part');
    await this.inputs.checkAudioLengths([{ ...clip, label: 'audio_sample' }], CLIP_SECONDS.speech);
    return this.voices.add(name.trim(), consent, clip, refText);
  }

  removeVoice(id: string): void {
    if (!this.voices.remove(id)) throw new NotFoundError(`no saved voice ${JSON.stringify(id)}`);
  }

  /** The speech in response_format; `seconds`: the length of the speech the model made (before speed). */
  async speak(dto: OpenAiSpeechDto, signal?: AbortSignal): Promise<{ body: Buffer; type: string; seconds: number }> {
    const model = dto.model ?? TTS_PROFILE;
    if (model !== TTS_PROFILE && !(OPENAI_SPEECH_MODELS as readonly string[]).includes(model)) {
      throw new BadInputError(`unknown model ${JSON.stringify(model)}; speech models here: ${TTS_PROFILE} (and ${OPENAI_SPEECH_MODELS.join(', ')}, which run it)`);
    }
    checkPrompt(dto.input, 'input');
    const voice = this.voiceOf(dto.voice);
    const { audio } = await this.tts.speak({ text: dto.input, language: dto.language, ref_text: voice.ref_text }, async () => this.voices.clip(voice), signal);
    const wav = await this.read(audio.replace(/^\/out\//, ''));
    const seconds = wavSeconds(wav);
    const format = dto.response_format ?? 'mp3';
    const speed = dto.speed ?? 1;
    if (format === 'wav' && speed === 1) return { body: wav, type: ENCODE.wav.type, seconds };
    // into a file, not a pipe: flac's and wav's headers give the length only when ffmpeg can seek back to them
    const dir = await mkdtemp(join(tmpdir(), 'kiln-speech-'));
    try {
      const out = join(dir, `speech.${format}`);
      const args = [...BASE_ARGS, '-loglevel', 'error', '-i', 'pipe:0', ...(speed !== 1 ? ['-filter:a', tempoChain(speed)] : []), ...ENCODE[format].args, out];
      const exit = await runFfmpeg(args, { timeoutMs: 120_000, signal, input: wav });
      if (exit.code !== 0) throw new UnavailableError(`encoding the speech as ${format} failed: ${exit.stderr}`);
      return { body: await readFile(out), type: ENCODE[format].type, seconds };
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }

  /**
   * stream_format sse: OpenAI's speech stream events (`speech.audio.delta` with base64 audio, then `speech.audio.done`
   * with usage), one `data:` line each. Qwen3-TTS here writes the whole wav at the end of a request (the worker reports
   * no audio before), so the events carry the finished audio, in response_format, cut into SSE_CHUNK_BYTES pieces:
   * sent after generation, never as it is generated. Their concatenation is the file stream_format audio answers.
   */
  static sseEvents(audio: Buffer, input: string, seconds: number): string[] {
    const events: string[] = [];
    for (let at = 0; at < audio.length; at += SSE_CHUNK_BYTES) {
      events.push(sseData({ type: 'speech.audio.delta', audio: audio.subarray(at, at + SSE_CHUNK_BYTES).toString('base64') }));
    }
    // Kiln counts no model tokens: input_tokens is the input's length in characters (code points), output_tokens the
    // frames of the speech model's 12.5 Hz codec the audio spans
    const input_tokens = [...input].length;
    const output_tokens = Math.ceil(seconds * SPEECH_CODEC_HZ);
    events.push(sseData({ type: 'speech.audio.done', usage: { input_tokens, output_tokens, total_tokens: input_tokens + output_tokens } }));
    return events;
  }

  private voiceOf(voice: string | { id: string }): SavedVoice {
    const key = typeof voice === 'string' ? voice : voice && typeof voice === 'object' && typeof voice.id === 'string' ? voice.id : undefined;
    if (key === undefined) throw new BadInputError('voice: a saved voice\'s id or name, as a string or as {"id": ...}');
    const found = this.voices.find(key);
    if (found) return found;
    const saved = this.voices.list().map((v) => `${v.name} (${v.id})`);
    throw new BadInputError(`voice ${JSON.stringify(key)}: no saved voice has that id or name; Kiln's speech model clones a voice from a clip, so save one first (POST /v1/audio/voices with audio_sample and name ${JSON.stringify(key)} to use this name); saved voices: ${saved.length ? saved.join(', ') : 'none'}`);
  }

  private async read(file: string): Promise<Buffer> {
    const f = await this.files.open(file);
    if (!f || 'unsatisfiable' in f) throw new UnavailableError(`the speech file ${file} is gone`);
    return buffer(f.body);
  }
}
