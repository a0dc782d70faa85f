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

  async speak(dto: OpenAiSpeechDto, signal?: AbortSignal): Promise<{ body: Buffer; type: string }> {
    const model = dto.model ?? TTS_PROFILE;
    if (model !== TTS_PROFILE && !(OPENAI_SPEECH_MODELS as readonly string[]).includes(model)) {
      throw new BadInputError(`unknown model ${JSON.stringify(model)}; speech models here: ${TTS_PROFILE} (and ${OPENAI_SPEECH_MODELS.join(', ')}, which run it)`);
    }
    if (dto.stream_format === 'sse') throw new BadInputError('stream_format sse is not built yet; ask stream_format audio (the default)');
    checkPrompt(dto.input, 'input');
    const voice = this.voiceOf(dto.voice);
    const { audio } = await this.tts.speak({ text: dto.input, language: dto.language, ref_text: voice.ref_text }, async () => this.voices.clip(voice), signal);
    const wav = await this.read(audio.replace(/^\/out\//, ''));
    const format = dto.response_format ?? 'mp3';
    const speed = dto.speed ?? 1;
    if (format === 'wav' && speed === 1) return { body: wav, type: ENCODE.wav.type };
    // into a file, not a pipe: flac's and wav's headers give the length only when ffmpeg can seek back to them
    const dir = await mkdtemp(join(tmpdir(), 'kiln-speech-'));
    try {
      const out = join(dir, `speech.${format}`);
      const args = [...BASE_ARGS, '-loglevel', 'error', '-i', 'pipe:0', ...(speed !== 1 ? ['-filter:a', tempoChain(speed)] : []), ...ENCODE[format].args, out];
      const exit = await runFfmpeg(args, { timeoutMs: 120_000, signal, input: wav });
      if (exit.code !== 0) throw new UnavailableError(`encoding the speech as ${format} failed: ${exit.stderr}`);
      return { body: await readFile(out), type: ENCODE[format].type };
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
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
