// Qwen3-TTS-12Hz Base as a service pipeline: voice-clone speech from a reference clip and a text
// (upstream Qwen3TTSModel.generate_voice_clone; docs/models/qwen3-tts.md). One request:
//   reference clip -> mono at its own rate -> 24 kHz (speaker-resample.ts, as upstream's librosa call)
//     -> speaker embedding (x-vector) and, when a transcript is given, reference codes (codec encoder; ICL mode)
//   text -> chunks at sentence boundaries (text-split.ts) -> per chunk: tokenizer -> talker prompt (prompt.ts) -> embeddings
//     -> talker + code predictor frame by frame (seeded sampling, generation_config.json defaults) -> codes
//     -> codec decoder -> 24 kHz samples (ICL: the reference frames are decoded in front and cut, as upstream)
//   chunks joined with a short pause -> 16-bit mono wav, written atomically.
// Loading reads a checkpoint folder in the published format (real weights or the demo checkpoint, demo.ts).
import { randomInt } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { BadInputError, throwIfCancelled } from '../../common/errors';
import type { Engine } from '../../engine/engine';
import { Checkpoint } from '../../engine/safetensors';
import type { Tensor } from '../../engine/tensor';
import { CLIP_SECONDS, STAGE } from '../../catalog';
import { decodeAudio, probeAudio } from '../../media/audio-input';
import { SPEECH_SAMPLE_RATE, writeWav } from '../../media/wav';
import { ResidentPipeline, type RunContext } from '../common/pipeline';
import { defaultComputeDType, type ComputeDType } from '../common/weights';
import { assertFiniteOutput } from '../common/finite-output';
import { TextTokenizer } from '../tokenizer';
import { CodecDecoder, CodecEncoder } from './codec';
import {
  parseGenerationConfig, parseQwen3TtsConfig, parseSpeechTokenizerConfig,
  type Qwen3TtsConfig, type Qwen3TtsSampling, type SpeechTokenizerConfig,
} from './config';
import { embedPrompt, freePromptEmbeds, generateCodes } from './generate';
import { codecLanguageId, TtsLanguageError } from './languages';
import { assistantText, buildTalkerPrompt, refText } from './prompt';
import { SpeakerEncoder, speakerEmbedding } from './speaker-encoder';
import { resampleAudio } from './speaker-resample';
import { Qwen3TtsTalker } from './talker';
import { DEFAULT_CHUNK_UNITS, splitForSpeech, textUnits } from './text-split';

/** What one speech request asks for (the GPU worker builds it from its task: src/worker/profiles/speech.ts). */
export interface Qwen3TtsTask {
  text: string;
  /** A service language name (Auto, English, ...). */
  language: string;
  /** Transcript of the clip; empty: speaker-embedding-only cloning. */
  refText: string;
  refAudioPath: string;
  /** 16-bit mono 24 kHz wav, written through a temp name. */
  outputPath: string;
  /** Sampling seed (u32); absent: a fresh random one per request, as upstream samples unseeded. */
  seed?: number;
}

/** The checkpoint's three config files, parsed. */
export interface Qwen3TtsConfigs {
  model: Qwen3TtsConfig;
  generation: Qwen3TtsSampling;
  speechTokenizer: SpeechTokenizerConfig;
}

export async function readQwen3TtsConfigs(dir: string): Promise<Qwen3TtsConfigs> {
  const json = async (name: string, optional = false): Promise<unknown> => {
    try {
      return JSON.parse(await readFile(join(dir, name), 'utf8'));
    } catch (e) {
      if (optional && (e as NodeJS.ErrnoException).code === 'ENOENT') return {};
      throw new Error(`Qwen3-TTS checkpoint ${dir}: cannot read ${name} (${(e as Error).message})`);
    }
  };
  return {
    model: parseQwen3TtsConfig(await json('config.json'), join(dir, 'config.json')),
    // Without the file upstream falls back to its hard defaults; so do we (parseGenerationConfig's defaults).
    generation: parseGenerationConfig(await json('generation_config.json', true), join(dir, 'generation_config.json')),
    speechTokenizer: parseSpeechTokenizerConfig(await json('speech_tokenizer/config.json'), join(dir, 'speech_tokenizer/config.json')),
  };
}

export interface PartsOptions {
  /** Talker and code predictor compute dtype (the speaker vector is cast to it). */
  dtype: ComputeDType;
  /** Talker and code predictor linears as weight-only int8 (per-channel scales). Default false. */
  int8?: boolean;
  /** Codec decoder dtype (default f32: the waveform path is cheap next to the talker). */
  codecDtype?: ComputeDType;
  /** Load the codec encoder (only ICL requests use it). Default true. */
  encoder?: boolean;
}

/** Every model part a request uses, loaded on one engine. */
export interface Qwen3TtsParts {
  talker: Qwen3TtsTalker;
  speaker: SpeakerEncoder;
  decoder: CodecDecoder;
  encoder: CodecEncoder | null;
  free(): void;
}

/**
 * Loads the parts from the two weight files: model.safetensors (talker.*, speaker_encoder.*) and
 * speech_tokenizer/model.safetensors (decoder.*, encoder.*). The demo checkpoint's key list is recorded by running
 * exactly this function (demo.ts), so the demo holds what these loaders read and nothing else.
 */
export async function loadQwen3TtsParts(e: Engine, model: Checkpoint, speech: Checkpoint, cfg: Qwen3TtsConfigs, o: PartsOptions, signal?: AbortSignal): Promise<Qwen3TtsParts> {
  const owned: { free(): void }[] = [];
  const step = <T extends { free(): void }>(part: T): T => {
    owned.push(part);
    throwIfCancelled(signal);
    return part;
  };
  try {
    const talker = step(await Qwen3TtsTalker.load(e, model, cfg.model, { dtype: o.dtype, int8: o.int8 }));
    const speaker = step(await SpeakerEncoder.load(e, model, cfg.model.speakerEncoder, { dtype: 'f32' }));
    const decoder = step(await CodecDecoder.load(e, speech, cfg.speechTokenizer, { dtype: o.codecDtype ?? 'f32' }));
    const encoder = (o.encoder ?? true) ? step(await CodecEncoder.load(e, speech, cfg.speechTokenizer)) : null;
    return { talker, speaker, decoder, encoder, free: () => owned.reverse().forEach((p) => p.free()) };
  } catch (err) {
    for (const p of owned.reverse()) p.free();
    throw err;
  }
}

/** Frames allowed per chunk: upstream's max_new_tokens (8192 in generation_config.json), capped at 3 s plus 0.3 s
 * per text unit (about four times a normal speaking rate), so weights that never pick codec eos (the demo's random
 * ones, or a real model gone astray) end in bounded time. One talker token more than frames: see generate.ts. */
export function maxNewTokensFor(units: number, sampling: Pick<Qwen3TtsSampling, 'maxNewTokens'>, frameRate = 12.5): number {
  const cap = Math.ceil(frameRate * (3 + 0.3 * units)) + 1;
  return Math.max(2, Math.min(sampling.maxNewTokens, cap));
}

/** Silence between two chunks of a long text, in seconds. */
export const CHUNK_PAUSE_S = 0.12;

interface Loaded {
  e: Engine;
  dir: string;
  configs: Qwen3TtsConfigs;
  tokenizer: TextTokenizer;
  parts: Qwen3TtsParts;
  /** GPU bytes the load added to the engine's pool (weights, prepared convs, mel matrices). */
  bytes: number;
}

export interface Qwen3TtsPipelineOptions {
  engine(): Promise<Engine>;
  /** The checkpoint folder to load: real weights, or the demo checkpoint (generated on first use). */
  checkpoint(e: Engine, signal: AbortSignal): Promise<string>;
  /** Told the GPU bytes held once loaded (ServedEntry.residentBytes reports them). */
  onLoaded?(bytes: number, dir: string): void;
  /** Sentence-chunk limit in text units (text-split.ts). */
  chunkUnits?: number;
  /** Talker and code predictor dtype (default f16 where the adapter has shader-f16, else f32; the end-to-end golden runs f32). */
  dtype?: ComputeDType;
  /** Overrides of generation_config.json, as upstream's generate_voice_clone(**kwargs) (the end-to-end golden: greedy). */
  generation?: Partial<Qwen3TtsSampling>;
  /** Sees each chunk's generated codes (frames x code groups) and the samples before the wav (tests). */
  onCodes?(frames: number[][]): void;
  onAudio?(samples: Float32Array): void;
}

/** The 'tts' pipeline (the GPU worker serves it: src/worker/profiles/speech.ts). */
export class Qwen3TtsPipeline extends ResidentPipeline<Qwen3TtsTask, Loaded> {
  constructor(private readonly o: Qwen3TtsPipelineOptions) {
    super();
  }

  protected async loadModel(ctx: RunContext): Promise<Loaded> {
    const e = await this.o.engine();
    const dir = await this.o.checkpoint(e, ctx.signal);
    throwIfCancelled(ctx.signal);
    const configs = await readQwen3TtsConfigs(dir);
    const tokenizer = await TextTokenizer.fromDir(dir);
    const before = e.pool.stats().inUseBytes;
    const model = await Checkpoint.open(join(dir, 'model.safetensors'));
    try {
      const speech = await Checkpoint.open(join(dir, 'speech_tokenizer', 'model.safetensors'));
      try {
        const dtype: ComputeDType = this.o.dtype ?? defaultComputeDType(e);
        const parts = await loadQwen3TtsParts(e, model, speech, configs, { dtype }, ctx.signal);
        const bytes = e.pool.stats().inUseBytes - before;
        return { e, dir, configs, tokenizer, parts, bytes };
      } finally {
        await speech.close();
      }
    } finally {
      await model.close();
    }
  }

  protected override afterLoad(m: Loaded): void {
    this.o.onLoaded?.(m.bytes, m.dir);
  }

  async run(task: Qwen3TtsTask, ctx: RunContext): Promise<void> {
    const m = await this.loaded(ctx); // a lost device took the weights with it: loaded again
    const { talker, speaker, decoder, encoder } = m.parts;
    const cfg = m.configs.model;
    const e = m.e;

    let languageId: number | null;
    try {
      languageId = codecLanguageId(cfg, task.language);
    } catch (err) {
      if (err instanceof TtsLanguageError) throw new BadInputError(`language: ${err.message}`);
      throw err;
    }
    const chunks = splitForSpeech(task.text, this.o.chunkUnits ?? DEFAULT_CHUNK_UNITS);
    if (chunks.length === 0) throw new BadInputError('text is empty; say what to speak');
    const transcript = task.refText.trim();
    const seed = task.seed ?? randomInt(0, 2 ** 31);

    ctx.stage(STAGE.encode);
    const clip = await readReferenceClip(task.refAudioPath, ctx.signal);
    let spk: Tensor;
    try {
      spk = speakerEmbedding(e, speaker, clip, SPEECH_SAMPLE_RATE, { dtype: talker.dtype });
    } catch (err) {
      if (err instanceof RangeError) throw new BadInputError(`ref_audio: ${err.message.replace(/^speakerEmbedding: /, '')}`);
      throw err;
    }
    try {
      let ref: { ids: number[]; codes: number[][] } | null = null;
      if (transcript) {
        if (!encoder) throw new Error('Qwen3-TTS: the codec encoder was not loaded, so a ref_text (in-context cloning) cannot be used');
        const { codes, frames } = await encoder.encode(clip);
        const nq = codes.length / frames;
        ref = { ids: m.tokenizer.encode(refText(transcript)), codes: Array.from({ length: frames }, (_, t) => Array.from(codes.subarray(t * nq, (t + 1) * nq))) };
      }
      throwIfCancelled(ctx.signal);

      const g = { ...m.configs.generation, ...this.o.generation };
      const budgets = chunks.map((c) => maxNewTokensFor(textUnits(c), g));
      const totalFrames = budgets.reduce((a, b) => a + b - 1, 0);
      let framesDone = 0;
      const pieces: Float32Array[] = [];
      for (const [i, chunk] of chunks.entries()) {
        ctx.stage(STAGE.sample);
        const talkerPrompt = buildTalkerPrompt(cfg, {
          inputIds: m.tokenizer.encode(assistantText(chunk)),
          languageId,
          mode: ref ? 'icl' : 'xvec',
          refIds: ref?.ids,
          refCodes: ref?.codes,
        });
        const embeds = embedPrompt(talker, talkerPrompt, spk);
        let frames: number[][];
        try {
          ({ frames } = await generateCodes(talker, embeds, {
            maxNewTokens: budgets[i]!,
            talker: { doSample: g.doSample, temperature: g.temperature, topK: g.topK, repetitionPenalty: g.repetitionPenalty },
            subtalker: { doSample: g.subtalkerDoSample, temperature: g.subtalkerTemperature, topK: g.subtalkerTopK },
            seed: (seed + i) >>> 0,
            signal: ctx.signal,
            onFrame: () => ctx.progress(++framesDone, totalFrames),
          }));
        } finally {
          freePromptEmbeds(embeds);
        }
        throwIfCancelled(ctx.signal);
        this.o.onCodes?.(frames);
        if (frames.length === 0) continue;
        ctx.stage(STAGE.audioDecode);
        pieces.push(await decodeFrames(decoder, frames, ref?.codes ?? null));
        throwIfCancelled(ctx.signal);
      }
      ctx.stage(STAGE.save);
      const audio = joinPieces(pieces, Math.round(CHUNK_PAUSE_S * SPEECH_SAMPLE_RATE));
      this.o.onAudio?.(audio);
      assertFiniteOutput(audio, 'the decoded speech', 'try another seed or reference clip, and check the weight files (npm run weights -- list)');
      await writeWav(task.outputPath, { data: audio, sampleRate: SPEECH_SAMPLE_RATE, channels: 1, layout: 'planar' }, { signal: ctx.signal });
    } finally {
      spk.free();
    }
  }

  protected freeModel(m: Loaded): void {
    m.parts.free();
  }
}

/**
 * The clip as mono float samples at 24 kHz: decoded (ffmpeg averages the channels) at its own rate, then resampled
 * like upstream's librosa.resample. The service checked its length already; the limits are applied again here
 * because they decide what the encoders see. Bad or unreadable audio is a BadInputError naming ref_audio.
 */
export async function readReferenceClip(path: string, signal?: AbortSignal): Promise<Float32Array> {
  const buf = await readFile(path);
  const probe = await probeAudio(buf, 'ref_audio', { limits: CLIP_SECONDS.speech, signal });
  const rate = Math.min(192000, Math.max(8000, probe.sampleRate || SPEECH_SAMPLE_RATE));
  const audio = await decodeAudio(buf, { label: 'ref_audio', sampleRate: rate, channels: 1, limits: CLIP_SECONDS.speech, signal });
  for (const v of audio.data) if (!Number.isFinite(v)) throw new BadInputError('ref_audio: the decoded clip holds non-finite samples');
  return rate === SPEECH_SAMPLE_RATE ? audio.data : resampleAudio(audio.data, rate, SPEECH_SAMPLE_RATE);
}

/** Codes -> samples. ICL (upstream generate_voice_clone): decode reference ++ generated frames for context, then drop
 * the first int(ref_len / total_len * samples) samples. */
export async function decodeFrames(decoder: CodecDecoder, frames: number[][], refCodes: number[][] | null): Promise<Float32Array> {
  if (!refCodes?.length) return decoder.decode(frames);
  const all = await decoder.decode([...refCodes, ...frames]);
  const cut = Math.floor((refCodes.length / (refCodes.length + frames.length)) * all.length);
  return all.slice(cut);
}

function joinPieces(pieces: Float32Array[], gap: number): Float32Array {
  const total = pieces.reduce((a, p) => a + p.length, 0) + gap * Math.max(0, pieces.length - 1);
  const out = new Float32Array(total);
  let at = 0;
  for (const [i, p] of pieces.entries()) {
    if (i > 0) at += gap;
    out.set(p, at);
    at += p.length;
  }
  return out;
}
