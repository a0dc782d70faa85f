// What the text encoder reads for a keyframe (FL2VA) or reference (Ref2VA) request, as token ids and per-token modality
// tags: diffusers' MiniMaxH3FL2VATextEncoderStep and MiniMaxH3Ref2VATextEncoderStep._build_presentation (58eb52c0).
// No chat template and no special tokens around it; a vision block is <|vision_start|> + n pads + <|vision_end|>,
// tagged video (0), everything else text (1). Not wired into the service yet (issue 15, docs/models/minimax-h3.md
// "Part 2 status"): the vision tokens' count comes from the Qwen3-VL image processor's grid (h/32 x w/32 after its
// resize), and their rows from the vision tower.
//
//   FL2VA   per keyframe "<Picture i>: " + an <|image_pad|> block, then the prompt verbatim
//   Ref2VA  per reference in request order, numbered per kind: "<Audio j>: " first when it carries sound (a voice, or
//           a video's soundtrack); an image "<Picture i>: " + an <|image_pad|> block; a video "<Video k>: " then per
//           merged frame pair "<T.T seconds>" + a <|video_pad|> block; then the prompt verbatim
import { QWEN3_VL_IMAGE_PROCESSOR, type Qwen3VlImageProcessorConfig } from '../../qwen3_vl_vision/config';
import { smartResize } from '../../qwen3_vl_vision/preprocess';
import { TEXT_TAG, VIDEO_TAG } from '../sequence/packed-sequence';

/** The 32B's vision tower: 16-pixel patches merged 2 x 2 (processor/preprocessor_config.json, text_encoder/config.json). */
const PATCH = 16;
const MERGE = 2;

/**
 * <|image_pad|> tokens of a picture of height x width (the prepared canvas or reference): the Qwen3-VL image
 * processor's smart_resize to multiples of 32 within its pixel bounds, then (h / 32) (w / 32). 1344 x 768: 1008.
 */
export function imageTokenCount(height: number, width: number, proc: Qwen3VlImageProcessorConfig = QWEN3_VL_IMAGE_PROCESSOR): number {
  const [h, w] = smartResize(height, width, PATCH * MERGE, proc.minPixels, proc.maxPixels);
  return (h / (PATCH * MERGE)) * (w / (PATCH * MERGE));
}

export interface PresentationTokenizer {
  /** Ids of a text without special tokens added around it (tokenizer(text, add_special_tokens=False)). */
  encode(text: string): number[];
  tokenId(token: string): number;
}

export interface Presentation {
  ids: number[];
  /** Per id: TEXT_TAG, or VIDEO_TAG inside a vision block. */
  tags: number[];
}

export type PresentedReference =
  | { kind: 'image'; visionTokens: number }
  | { kind: 'audio' }
  | { kind: 'video'; hasAudio: boolean; blocks: readonly { timestamp: number; visionTokens: number }[] };

class Builder {
  readonly ids: number[] = [];
  readonly tags: number[] = [];
  constructor(private readonly tok: PresentationTokenizer) {}

  text(s: string): void {
    const ids = this.tok.encode(s);
    this.ids.push(...ids);
    for (let i = 0; i < ids.length; i++) this.tags.push(TEXT_TAG);
  }

  vision(pad: '<|image_pad|>' | '<|video_pad|>', n: number): void {
    if (!Number.isInteger(n) || n < 1) throw new RangeError(`presentation: a vision block of ${n} tokens`);
    const block = [this.tok.tokenId('<|vision_start|>'), ...new Array<number>(n).fill(this.tok.tokenId(pad)), this.tok.tokenId('<|vision_end|>')];
    this.ids.push(...block);
    for (let i = 0; i < block.length; i++) this.tags.push(VIDEO_TAG);
  }

  done(prompt: string): Presentation {
    if (typeof prompt !== 'string') throw new TypeError('presentation: the prompt must be one string');
    this.text(prompt);
    return { ids: this.ids, tags: this.tags };
  }
}

/** The FL2VA presentation: keyframe images in packed order (first before last), each with its vision token count. */
export function fl2vaPresentation(tok: PresentationTokenizer, prompt: string, imageTokens: readonly number[]): Presentation {
  const b = new Builder(tok);
  imageTokens.forEach((n, i) => {
    b.text(`<Picture ${i + 1}>: `);
    b.vision('<|image_pad|>', n);
  });
  return b.done(prompt);
}

/** The Ref2VA presentation of references in request order. */
export function ref2vaPresentation(tok: PresentationTokenizer, prompt: string, refs: readonly PresentedReference[]): Presentation {
  const b = new Builder(tok);
  const n = { image: 0, video: 0, audio: 0 };
  for (const r of refs) {
    if (r.kind === 'audio' || (r.kind === 'video' && r.hasAudio)) b.text(`<Audio ${++n.audio}>: `);
    if (r.kind === 'image') {
      b.text(`<Picture ${++n.image}>: `);
      b.vision('<|image_pad|>', r.visionTokens);
    } else if (r.kind === 'video') {
      b.text(`<Video ${++n.video}>: `);
      for (const blk of r.blocks) {
        b.text(`<${formatFixed1(blk.timestamp)} seconds>`);
        b.vision('<|video_pad|>', blk.visionTokens);
      }
    }
  }
  return b.done(prompt);
}

/**
 * Python's f"{x:.1f}" for a finite x >= 0 (a timestamp): the correctly rounded one-decimal form of x's exact binary
 * value, exact ties to even ("0.2" for 0.25, where JavaScript's toFixed gives "0.3").
 */
export function formatFixed1(x: number): string {
  if (!Number.isFinite(x) || x < 0) throw new RangeError(`formatFixed1: ${x} (a finite timestamp >= 0)`);
  // x * 10 = 8x + 2x (both exact); TwoSum tells whether the sum, hence the product, is exact
  const a = 8 * x;
  const c = 2 * x;
  const s = a + c;
  const bb = s - a;
  const exact = a - (s - bb) + (c - bb) === 0;
  const f = Math.floor(s);
  if (exact && s - f === 0.5) {
    const even = f % 2 === 0 ? f : f + 1;
    return `${Math.floor(even / 10)}.${even % 10}`;
  }
  return x.toFixed(1);
}
