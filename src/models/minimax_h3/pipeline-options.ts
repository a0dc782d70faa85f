// What MiniMaxH3Pipeline (pipeline.ts) is built from: the checkpoint's folders, the profile's transformer loader, the
// residency policy's options (residency.ts) and the observers tests and benchmarks attach.
import { join } from 'node:path';
import type { Engine } from '../../engine/engine';
import type { ComputeDType } from '../common/weights';
import type { Rgb8Image } from '../common/pil-resize';
import type { HostLatents } from './conditioning/condition-rows';
import type { Track } from './conditioning/track-inputs';
import type { EncodedVoice, Voice } from './conditioning/voice-inputs';
import type { ReferenceCanvas } from './conditioning/reference-inputs';
import type { Geometry } from './sequence/packed-sequence';
import type { H3SampleOptions } from './sampler/sampler';
import type { H3BlockPlacement, MiniMaxH3Transformer } from './transformer/transformer';
import type { H3Partition } from './variants';
import type { VideoLatents, VideoVaeDecodeOptions } from './vae/video';
import type { H3ResidencyOptions, H3ResidencyReport } from './residency';

/** The folders of one checkpoint's parts, each as in the published repo (transformer/, text_encoder/, ...). */
export interface H3Dirs {
  transformer: string;
  /** The Ref2VA partition (reference pictures), where the weights have it. */
  transformerRef?: string;
  textEncoder: string;
  tokenizer: string;
  vae: string;
  audioVae: string;
}

/** The parts' folders of a checkpoint in the published diffusers format under one root (MiniMax-H3/, the demo). */
export function h3DirsFromRoot(root: string, transformerRoot = root): H3Dirs {
  return {
    transformer: join(transformerRoot, 'transformer'),
    transformerRef: join(transformerRoot, 'transformer_ref'),
    textEncoder: join(root, 'text_encoder'),
    tokenizer: join(root, 'tokenizer'),
    vae: join(root, 'vae'),
    audioVae: join(root, 'audio_vae'),
  };
}

/** Loads the profile's transformer (profiles.ts loadH3Transformer: checkpoint format, adapter merge, int8); `blocks`:
 * where its blocks go as they load (the residency policy's: H3LoadOptions.blocks). */
export type H3TransformerLoader = (e: Engine, dirs: H3Dirs, o: { dtype: ComputeDType; partition: H3Partition; blocks?: H3BlockPlacement }) => Promise<MiniMaxH3Transformer>;

/** Observations for tests and the benchmark: each stage, each step, and GPU bytes in use at each. */
export interface H3PipelineTrace {
  (event: string, info: { inUseBytes: number }): void;
}

export interface H3PipelineOptions extends H3ResidencyOptions {
  engine(): Promise<Engine>;
  /** The folders to load: real weights, or the demo checkpoint (generated on first use). */
  dirs(e: Engine, signal: AbortSignal): Promise<H3Dirs>;
  loadTransformer: H3TransformerLoader;
  /** Explicit sigma grids per grid-point count (a checkpoint that publishes its own positions), else the grid from the
   * step plan and the shifts. */
  sigmas?(gridPoints: number): H3SampleOptions['sigmas'];
  /** Extra sampler options of the profile (step caching). */
  sampler?: Partial<H3SampleOptions>;
  /** Video VAE spatial tiling (default the released 256 / 64 px tiles). */
  tiling?: VideoVaeDecodeOptions['tiling'];
  /** How reference pictures are sized (reference-inputs.ts): 'match' (default: at most the frame's area, never up) or
   * upstream diffusers' 'diffusers' (a 2048 short edge). */
  referenceCanvas?: ReferenceCanvas;
  /** Told each job's residency decision. */
  onResidency?(r: H3ResidencyReport): void;
  /** Told the GPU bytes held once loaded (ServedEntry.residentBytes). */
  onLoaded?(bytes: number, dirs: H3Dirs): void;
  trace?: H3PipelineTrace;
  /** Compute dtype of the transformer, text encoder and video VAE (default f16 where the adapter has shader-f16, else
   * f32; the end-to-end golden runs f32). */
  dtype?: ComputeDType;
  /** The initial latents instead of h3Noise(seed): video [C, F, h, w] and audio [2, A, Na] (the end-to-end golden
   * gives upstream's torch draws). */
  noise?(geo: Geometry, videoChannels: number, audioChannels: number): { video: Float32Array; audio: Float32Array };
  /** Sees the sampled latents (normalised, before the VAEs), each decoded frame [H, W, 3] in [0, 1] and the decoded
   * stereo channels (tests). */
  onSampled?(video: VideoLatents, audio: { data: Float32Array; shape: [number, number, number] }): void;
  onFrame?(frame: Float32Array, index: number): void;
  /** The text encoder's input: token ids, per-row tags (vision rows VIDEO_TAG) and how many pictures it sees. */
  onText?(t: { ids: readonly number[]; tags: Uint8Array; pictures: number }): void;
  /** Keyframe jobs: the prepared pictures [H, W, 3] (8-bit) and the conditioning rows [rows, 96] as uploaded and as
   * read back after the last step (tests: the sampler must leave them unchanged). */
  onKeyframes?(k: { pictures: Rgb8Image[]; latents: HostLatents[]; rows: Float32Array; after: Float32Array }): void;
  /** Reference jobs: the same for the reference pictures (each on its own canvas), with the text the model was given
   * (the prompt with its <Picture n> definitions: catalog referencePrompt). */
  onReferences?(r: { pictures: Rgb8Image[]; latents: HostLatents[]; rows: Float32Array; after: Float32Array; prompt: string }): void;
  onAudio?(channels: Float32Array[], sampleRate: number): void;
  /** Track jobs: the prepared clip (what the mp4 carries), its conditioning rows [2 * Na, A] as uploaded and as read
   * back after the last step (tests: unchanged by the sampler). */
  onTrack?(t: { track: Track; rows: Float32Array; after: Float32Array }): void;
  /** Jobs with audio references (voices, or a soundtrack with reference pictures): the prepared clips (32 kHz stereo),
   * their rows [sum 2 T_j, A] as uploaded and as read back after the last step (tests: unchanged by the sampler), and
   * the track the mp4 carries (a soundtrack's; null for voices). */
  onVoices?(v: { voices: Voice[]; encoded: EncodedVoice[]; rows: Float32Array; after: Float32Array; track: Track | null }): void;
}
