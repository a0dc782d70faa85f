// bench:video --references N [--voices M]: a reference job's (image_mode reference, audio_mode voice; the Ref2VA
// partition) packed sequence at a case's size, and its encoders, for main.ts's transformer step and encoder phases.
//   rows   [ text | N picture blocks | M voice blocks | target audio (2 x Na) | target video ]  (references.ts
//          buildReferenceSequence, as the pipeline packs a job)
//   text   the Ref2VA presentation (presentation.ts ref2vaPresentation): per picture "<Picture i>: " + a vision block
//          of imageTokenCount(canvas) pads + 2, per voice "<Audio j>: ", then the prompt (--text-tokens rows); the
//          released checkpoint has the vision tower, so the pictures are shown (the demo's is not: see job.ts)
//   a picture   its own canvas, ComfyUI's match (image-prep.ts referenceMatchSize: at most the frame's area, sides on
//          32); by default each picture is the frame's size (the most rows match lets one take: one target frame);
//          --picture-sizes 1024x1024,720x1280 gives the source pictures' sizes (cycled)
//   a voice    the longest the pipeline keeps (voice-inputs.ts prepareVoice: the first int(frames / 24 x rate)
//          samples of a 15 s clip, at 32 kHz), ceil(samples / hop) latents per channel, 2 x that rows
import type { Engine } from '../../src/engine/engine';
import type { WeightSynth } from '../../src/models/common/random-weights';
import { SyntheticCheckpoint } from '../../src/models/common/synthetic-checkpoint';
import { AudioVaeEncoder, encoderHop, parseAudioVaeEncoderConfig } from '../../src/models/minimax_h3/vae/audio';
import { normalizePixels, VideoVaeEncoder } from '../../src/models/minimax_h3/vae/video';
import { referenceMatchSize } from '../../src/models/minimax_h3/conditioning/image-prep';
import { ref2vaPresentation, imageTokenCount, type PresentationTokenizer, type PresentedReference } from '../../src/models/minimax_h3/text-encoder/presentation';
import { buildReferenceSequence, type ReferenceBlock } from '../../src/models/minimax_h3/sequence/references';
import { resolveGeometry, TEXT_TAG, VIDEO_TAG, type Geometry, type PackedSequence } from '../../src/models/minimax_h3/sequence/packed-sequence';
import { MAX_KEYFRAMES } from '../../src/models/minimax_h3/sequence/keyframes';
import { MAX_VOICES } from '../../src/models/minimax_h3/task';
import { prepareVoice } from '../../src/models/minimax_h3/conditioning/voice-inputs';
import { TRACK_SAMPLE_RATE } from '../../src/models/minimax_h3/conditioning/track-inputs';

/** The contract's longest voice clip (seconds); the pipeline keeps at most the video's length of it. */
const LONGEST_VOICE_S = 15;

export interface ReferenceSpec {
  pictures: number;
  voices: number;
  /** Source picture sizes [width, height], cycled over the pictures; null: each picture is the frame's size. */
  pictureSizes: readonly (readonly [number, number])[] | null;
}

export interface ReferenceLayout {
  packed: PackedSequence;
  /** Per text row: TEXT_TAG, VIDEO_TAG inside a vision block. */
  textTags: Uint8Array;
  visionRows: number;
  /** Each picture's canvas (pixels), in request order. */
  canvases: { width: number; height: number }[];
  /** One voice as the audio VAE encoder takes it: [left, right] at 32 kHz. */
  voice: [Float32Array, Float32Array] | null;
  /** Latent frames per voice channel (its rows: 2 x this). */
  voiceLatents: number;
}

/** Counts each label as `n` tokens (no tokenizer at hand: "<Picture 1>: " is 6 in the released one, "<Audio 1>: " 5). */
export function approximateLabels(n: number): PresentationTokenizer {
  return { encode: (s) => (s ? new Array<number>(n).fill(0) : []), tokenId: () => 0 };
}

/** "1024x1024,720x1280" -> [[1024, 1024], [720, 1280]]. */
export function parseSizes(spec: string | undefined): [number, number][] | null {
  if (!spec) return null;
  return spec.split(',').map((s) => {
    const m = /^(\d+)x(\d+)$/.exec(s.trim());
    if (!m) throw new Error(`--picture-sizes: "${s}" must be <width>x<height>`);
    return [Number(m[1]), Number(m[2])];
  });
}

export function checkSpec(spec: ReferenceSpec): void {
  if (!(Number.isInteger(spec.pictures) && spec.pictures >= 1 && spec.pictures <= MAX_KEYFRAMES)) throw new Error(`--references: ${spec.pictures} pictures (1 to ${MAX_KEYFRAMES})`);
  if (!(Number.isInteger(spec.voices) && spec.voices >= 0 && spec.voices <= MAX_VOICES)) throw new Error(`--voices: ${spec.voices} (0 to ${MAX_VOICES}, with --references)`);
}

/** The packed Ref2VA sequence of `spec` on a case of width x height with geometry `geo`. */
export function referenceLayout(
  c: { width: number; height: number; geo: Geometry },
  spec: ReferenceSpec,
  o: { textTokens: number; patch: readonly [number, number, number]; labels: PresentationTokenizer; audioVaeConfig: unknown },
): ReferenceLayout {
  checkSpec(spec);
  const canvases = Array.from({ length: spec.pictures }, (_, i) => {
    const [w, h] = spec.pictureSizes?.[i % spec.pictureSizes.length] ?? [c.width, c.height];
    return referenceMatchSize(w, h, c.width, c.height);
  });
  let voice: [Float32Array, Float32Array] | null = null;
  let voiceLatents = 0;
  if (spec.voices) {
    const clip = new Float32Array(LONGEST_VOICE_S * TRACK_SAMPLE_RATE).map((_, i) => 0.3 * Math.sin(i * 0.05));
    voice = prepareVoice([clip], TRACK_SAMPLE_RATE, c.geo.numFrames);
    voiceLatents = Math.ceil(voice[0].length / encoderHop(parseAudioVaeEncoderConfig(o.audioVaeConfig, 'audio_vae config')));
  }
  const presented: PresentedReference[] = [
    ...canvases.map((cv) => ({ kind: 'image' as const, visionTokens: imageTokenCount(cv.height, cv.width) })),
    ...Array.from({ length: spec.voices }, () => ({ kind: 'audio' as const })),
  ];
  const tags = ref2vaPresentation(o.labels, '', presented).tags; // the prompt's rows follow
  const textTags = new Uint8Array(tags.length + o.textTokens).fill(TEXT_TAG);
  textTags.set(tags);
  const blocks: ReferenceBlock[] = [
    ...canvases.map((cv) => {
      const g = resolveGeometry(1, cv.height, cv.width, o.patch); // one latent frame on the picture's own grid
      return { kind: 'image' as const, latentHeight: g.latentHeight, latentWidth: g.latentWidth };
    }),
    ...Array.from({ length: spec.voices }, () => ({ kind: 'audio' as const, audioLatents: voiceLatents })),
  ];
  const packed = buildReferenceSequence({
    textTags, numLatentFrames: c.geo.numLatentFrames, latentHeight: c.geo.latentHeight, latentWidth: c.geo.latentWidth,
    numAudioLatents: c.geo.numAudioLatents, patchSize: o.patch, references: blocks,
  });
  return { packed, textTags, visionRows: tags.filter((t) => t === VIDEO_TAG).length, canvases, voice, voiceLatents };
}

export interface EncoderBench {
  e: Engine;
  synth: WeightSynth;
  /** vae/config.json with its channels already divided (--encoder-div), and audio_vae/config.json. */
  videoVaeConfig: Record<string, unknown> | null;
  audioVaeConfig: unknown | null;
  cases: readonly { label: string; layout: ReferenceLayout }[];
  log(line: string): void;
  fmt(ms: number): string;
  peak(): string;
}

/**
 * The reference encoders of each case, as the pipeline runs them per job (loaded for it, f32, freed): the video VAE
 * encoder once per distinct picture canvas (released tiling), summed over the pictures; the audio VAE encoder on one
 * voice (stereo, the case's length), times the voices. Each picture's latent grid is checked against the layout's.
 */
export async function benchReferenceEncoders(b: EncoderBench): Promise<void> {
  const { e } = b;
  const gib = (n: number) => `${(n / 2 ** 30).toFixed(2)} GiB`;
  if (b.videoVaeConfig) {
    const before = e.pool.stats().inUseBytes;
    const ckpt = new SyntheticCheckpoint({ label: 'random vae encoder', dtype: 'F16', fill: b.synth.fill });
    const enc = await VideoVaeEncoder.load(e, ckpt.checkpoint, b.videoVaeConfig);
    b.log(`video VAE encoder: channels ${(b.videoVaeConfig.block_out_channels as number[]).join('/')}, f32, ${gib(e.pool.stats().inUseBytes - before)} on the GPU`);
    for (const c of b.cases) {
      const times = new Map<string, number>();
      for (const cv of c.layout.canvases) {
        const key = `${cv.width}x${cv.height}`;
        if (times.has(key)) continue;
        const px = { data: Float32Array.from({ length: 3 * cv.height * cv.width }, (_, i) => (i * 7919) % 256), shape: [3, 1, cv.height, cv.width] as const };
        const t0 = performance.now();
        const m = await enc.encode(normalizePixels(px));
        times.set(key, performance.now() - t0);
        const want = resolveGeometry(1, cv.height, cv.width);
        if (m.shape[1] !== 1 || m.shape[2] !== want.latentHeight || m.shape[3] !== want.latentWidth) throw new Error(`reference ${key}: moments [${m.shape.join(', ')}], the layout packs ${want.latentHeight}x${want.latentWidth}`);
        b.log(`${c.label}: one ${key} reference picture -> moments [${m.shape.join(', ')}]: ${b.fmt(times.get(key)!)}; peak ${b.peak()}`);
      }
      const total = c.layout.canvases.reduce((s, cv) => s + times.get(`${cv.width}x${cv.height}`)!, 0);
      b.log(`${c.label}: ${c.layout.canvases.length} reference pictures -> ~${b.fmt(total)} of encoding per job (each canvas size timed once above)`);
    }
    enc.free();
  }
  if (b.audioVaeConfig && b.cases.some((c) => c.layout.voice)) {
    const before = e.pool.stats().inUseBytes;
    const ckpt = new SyntheticCheckpoint({ label: 'random audio vae encoder', dtype: 'F32', fill: b.synth.fill });
    const enc = await AudioVaeEncoder.load(e, ckpt.checkpoint, b.audioVaeConfig);
    b.log(`audio VAE encoder: f32, ${gib(e.pool.stats().inUseBytes - before)} on the GPU`);
    await enc.encode([new Float32Array(800), new Float32Array(800)]); // compile
    for (const c of b.cases) {
      const v = c.layout.voice;
      if (!v) continue;
      const t0 = performance.now();
      const p = await enc.encode(v);
      const ms = performance.now() - t0;
      if (p.frames !== c.layout.voiceLatents) throw new Error(`${c.label}: the encoder gave ${p.frames} latents, the layout packs ${c.layout.voiceLatents}`);
      const voices = c.layout.packed.numConditionAudioRows / (2 * p.frames);
      b.log(`${c.label}: one voice (${(v[0].length / TRACK_SAMPLE_RATE).toFixed(2)} s stereo at 32 kHz) -> ${p.frames} latents x 2: ${b.fmt(ms)} (x ${voices} voices per job); peak ${b.peak()}`);
    }
    enc.free();
  }
}
