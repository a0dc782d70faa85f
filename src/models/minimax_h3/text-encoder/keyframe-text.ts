// The text a keyframe job's transformer is conditioned on. Upstream's FL2VA (diffusers MiniMaxH3FL2VATextEncoderStep)
// shows the text encoder each keyframe before the prompt: "<Picture i>: " + <|vision_start|> n x <|image_pad|>
// <|vision_end|> per picture (presentation.ts fl2vaPresentation), the Qwen3-VL tower's merged tokens written over the
// pad rows (vision.ts); those rows are tagged video (0) in the packed sequence. That needs a checkpoint
// whose text_encoder/ holds the vision tower (config.json's vision_config and the model.visual.* tensors) and whose
// tokenizer knows the vision tokens; the released 32B does. Where it does not (the demo checkpoint: neither), and for
// 3 to 6 keyframes (ComfyUI's guides are not shown to the text encoder: h3-conditioning.md 2), the prompt alone is
// encoded, as for text to video. Each picture is the prepared keyframe itself (a multiple of 32 within the image
// processor's bounds at every service size, so the processor resizes nothing).
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { rgb8ToTensor } from '../../../media';
import { Checkpoint } from '../../../engine/safetensors';
import type { Rgb8Image } from '../../common/pil-resize';
import { imagePatches, parseQwen3VlVisionConfig, QWEN3_VL_IMAGE_PROCESSOR, visionTokenCount, type Qwen3VlImageProcessorConfig, type Qwen3VlVisionConfig, type VisionInput } from '../../qwen3_vl_vision';
import { fl2vaPresentation, ref2vaPresentation, type Presentation, type PresentationTokenizer, type PresentedReference } from './presentation';

/** The FL2VA presentation for at most this many keyframes (first, last). */
export const FL2VA_MAX_PICTURES = 2;

export interface VisionTextPlan extends Presentation {
  /** The pictures' patch rows for the tower, in presentation order. */
  images: VisionInput[];
  /** text_encoder/config.json, for H3VisionTextEncoder.load. */
  config: Record<string, unknown>;
}

/** The tower's config when text_encoder/ holds one (vision_config and its tensors), else null (the demo). */
export async function visionTower(textEncoderDir: string): Promise<{ config: Record<string, unknown>; vision: Qwen3VlVisionConfig } | null> {
  const path = join(textEncoderDir, 'config.json');
  const config = JSON.parse(await readFile(path, 'utf8')) as Record<string, unknown>;
  if (!config.vision_config) return null;
  const vision = parseQwen3VlVisionConfig(config, path);
  const ckpt = await Checkpoint.open(textEncoderDir);
  try {
    return ckpt.has(`${vision.keyPrefix}patch_embed.proj.weight`) ? { config, vision } : null;
  } finally {
    await ckpt.close();
  }
}

/**
 * The FL2VA presentation of 1-2 prepared keyframes with the tower's inputs, or null when the prompt is encoded alone
 * (no tower, or more than two keyframes). A tower without the tokenizer's vision tokens is an inconsistent checkpoint:
 * an error, not a silent fallback.
 */
export async function keyframeTextPlan(
  textEncoderDir: string,
  tok: PresentationTokenizer & { hasToken(token: string): boolean },
  prompt: string,
  pictures: readonly Rgb8Image[],
  proc: Qwen3VlImageProcessorConfig = QWEN3_VL_IMAGE_PROCESSOR,
  /** 'reference': upstream's Ref2VA presentation (diffusers MiniMaxH3Ref2VATextEncoderStep), every picture shown as
   * "<Picture i>: " + its vision block, whatever their number; 'keyframe' (default): FL2VA for 1-2 pictures. */
  role: 'keyframe' | 'reference' = 'keyframe',
  /** Reference role: the voices after the pictures, each "<Audio j>: " alone (the waveform never reaches the encoder). */
  voices = 0,
): Promise<VisionTextPlan | null> {
  if (pictures.length === 0 || (role === 'keyframe' && pictures.length > FL2VA_MAX_PICTURES)) return null;
  if (voices && role !== 'reference') throw new RangeError('keyframeTextPlan: voices come with reference pictures only');
  const tower = await visionTower(textEncoderDir);
  if (!tower) return null;
  const { vision } = tower;
  for (const [token, id] of [['<|image_pad|>', vision.imageTokenId], ['<|vision_start|>', vision.visionStartTokenId], ['<|vision_end|>', vision.visionEndTokenId]] as const) {
    if (!tok.hasToken(token) || tok.tokenId(token) !== id) throw new Error(`MiniMax H3: the text encoder has a vision tower but the tokenizer's ${token} is not id ${id} of its config`);
  }
  const images = pictures.map((p, i) => imagePatches(rgb8ToTensor(p.data, p.width, p.height), vision, proc, `${role} ${i + 1}`));
  const counts = images.map((im) => visionTokenCount(im.grid, vision.spatialMergeSize));
  const presentation = role === 'reference'
    ? ref2vaPresentation(tok, prompt, [...counts.map((visionTokens) => ({ kind: 'image' as const, visionTokens })), ...voiceReferences(voices)])
    : fl2vaPresentation(tok, prompt, counts);
  return { ...presentation, images, config: tower.config };
}

/** `n` voices as the Ref2VA presentation's audio references ("<Audio j>: " each). */
export function voiceReferences(n: number): PresentedReference[] {
  return Array.from({ length: n }, () => ({ kind: 'audio' as const }));
}
