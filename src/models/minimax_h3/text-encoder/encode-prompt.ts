// A video job's text stage (编码提示词/图片): the prompt, and with 1-2 keyframes on a checkpoint with the Qwen3-VL
// tower its pictures (keyframe-text.ts), through the text encoder (layers < 50, uploaded from the host copy), which is
// FREED before the transformer's context_embedder + refiner run, so the sampler never has both on the GPU.
import { throwIfCancelled } from '../../../common/errors';
import type { Engine } from '../../../engine/engine';
import { Checkpoint } from '../../../engine/safetensors';
import type { Tensor } from '../../../engine/tensor';
import { STAGE } from '../../../catalog';
import type { Rgb8Image } from '../../common/pil-resize';
import type { RunContext } from '../../common/pipeline';
import type { ComputeDType } from '../../common/weights';
import type { TextTokenizer } from '../../tokenizer';
import { keyframeTextPlan, voiceReferences } from './keyframe-text';
import { ref2vaPresentation } from './presentation';
import { TEXT_TAG } from '../sequence/packed-sequence';
import { H3TextEncoder, type H3TextEncoderHost } from './encoder';
import { H3VisionTextEncoder } from './vision';
import type { MiniMaxH3Transformer } from '../transformer/transformer';

export interface PromptRowsInput {
  textEncoderDir: string;
  tokenizer: TextTokenizer;
  host: H3TextEncoderHost;
  transformer: MiniMaxH3Transformer;
  prompt: string;
  /** The keyframes as prepared onto the frame, or the prepared reference pictures (the text encoder may see them). */
  pictures: readonly Rgb8Image[];
  /** What the pictures are (default keyframes): picks the FL2VA or the Ref2VA presentation (keyframe-text.ts). */
  pictureRole?: 'keyframe' | 'reference';
  /** Voices of a reference job: "<Audio j>: " each after the pictures (upstream's Ref2VA presentation). Without the
   * vision tower the pictures are not shown, but the voices' labels still are (they are text alone). */
  voices?: number;
  dtype: ComputeDType;
  int8?: boolean;
  /** The decoder layers streamed from host memory while encoding (the residency policy's choice under a budget). */
  streamLayers?: boolean;
  /** Told the ids, per-row tags and how many pictures the encoder sees (tests). */
  onText?(t: { ids: readonly number[]; tags: Uint8Array; pictures: number }): void;
  trace(event: string): void;
  /** Called before the encoder is loaded and after it is freed (before encodeText): the pipeline moves the DiT's
   * weights to host memory and back there when both would not fit its memory budget. */
  beforeLoad?(): Promise<void>;
  afterFree?(): void;
}

/** The transformer's text context [L, D] (the caller frees it) and the per-row tags the packed sequence takes
 * (TEXT_TAG, VIDEO_TAG inside a picture's vision block). The stage is loadTextEncoder, then encode. */
export async function encodePromptRows(e: Engine, j: PromptRowsInput, ctx: RunContext): Promise<{ text: Tensor; textTags: Uint8Array }> {
  const vision = await keyframeTextPlan(j.textEncoderDir, j.tokenizer, j.prompt, j.pictures, undefined, j.pictureRole, j.voices ?? 0);
  // no tower: the prompt alone, or with voices their labels in front of it (the presentation without its pictures)
  const plain = vision ? null : j.voices ? ref2vaPresentation(j.tokenizer, j.prompt, voiceReferences(j.voices)) : null;
  const ids = vision ? vision.ids : plain ? plain.ids : H3TextEncoder.promptIds(j.tokenizer, j.prompt);
  const textTags = vision ? Uint8Array.from(vision.tags) : plain ? Uint8Array.from(plain.tags) : new Uint8Array(ids.length).fill(TEXT_TAG);
  j.onText?.({ ids, tags: textTags, pictures: vision?.images.length ?? 0 });
  await j.beforeLoad?.();
  const t = await j.host.load(e, j.textEncoderDir, { dtype: j.dtype, int8: j.int8, streamLayers: j.streamLayers });
  let encoder: { encode(): Tensor; free(): void } | null = { encode: () => t.encode(ids), free: () => t.free() };
  try {
    if (vision) {
      // the decoder from the host copy as for text, the tower read from the checkpoint for this job (docs "Left")
      const ckpt = await Checkpoint.open(j.textEncoderDir);
      try {
        const v = await H3VisionTextEncoder.withText(e, t, ckpt, vision.config, { dtype: j.dtype, int8: j.int8 });
        encoder = { encode: () => v.encode(ids, vision.images), free: () => v.free() };
      } finally {
        await ckpt.close();
      }
    }
    j.trace('text encoder loaded');
    throwIfCancelled(ctx.signal);
    ctx.stage(STAGE.encode);
    const embeds = encoder.encode();
    encoder.free();
    encoder = null;
    j.trace('text encoder freed');
    j.afterFree?.();
    try {
      return { text: j.transformer.encodeText(embeds), textTags };
    } finally {
      embeds.free();
    }
  } finally {
    encoder?.free();
  }
}
