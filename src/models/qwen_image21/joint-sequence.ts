// The joint token sequence of Qwen-Image-2.1 and its 3-axis RoPE positions, as upstream builds them
// (diffusers transformer_qwenimage21.py: forward's slot expansion, QwenImage21Rope.forward, build_token_metadata).
//
// Input, as the pipeline passes it:
//   imgMask   (Lvlm + Ltarget/4) flags over the text encoder's sequence (system prompt dropped), true at each
//             <|image_pad|> slot of a reference image, followed by one true slot per 2x2 group of target latents;
//   imgShapes (frame, height, width) in latent tokens per image: the references in order, the target last.
// Every slot becomes 4 joint tokens (one 2x2 latent group), every text token one. So the joint sequence is
//   [text | ref 1 tokens | text | ref 2 tokens | ... | text | target tokens]   (text runs may be empty)
// with the target always last: the prefix (everything before it) is what the KV cache holds across steps.
//
// Positions (frame, height, width): text tokens advance one shared counter on all three axes; an image block
// freezes the frame axis at the counter, lays height/width out on a grid centred on zero
// (rows -(h - h//2) .. h//2 - 1), and then moves the counter on by max(h, w).
// Attention (block-causal): token q sees key k when k <= q or both are in the same image block. With block ids
// that grow along the sequence (a new id per text token, one id per image block) that is "id[k] <= id[q]",
// which is the engine's block_causal mask.

export type ImageShape = readonly [number, number, number];

/** A maximal run of the prefix that comes from one source. */
export type PrefixRun =
  /** Joint rows [start, end) are the text encoder's rows [encoderStart, encoderStart + end - start). */
  | { kind: 'text'; start: number; end: number; encoderStart: number }
  /** Joint rows [start, end) are reference `image`'s latent rows, [latentStart, ...) of the packed references. */
  | { kind: 'image'; start: number; end: number; image: number; latentStart: number };

export interface JointSequence {
  /** Joint tokens: prefix + target. */
  length: number;
  prefixLength: number;
  targetLength: number;
  /** Rows of the text encoder's hidden states the transformer reads (text tokens and reference slots). */
  encoderLength: number;
  /** Latent rows of all references together (packed in order, each row-major h x w). */
  referenceTokens: number;
  target: { height: number; width: number };
  images: ImageShape[];
  /** RoPE positions per joint token. */
  frame: Float64Array;
  height: Float64Array;
  width: Float64Array;
  /** -1 at text tokens, the image's index (references 0.., target last) at image tokens. */
  imageIds: Int32Array;
  /** Block ids of the prefix for the block-causal mask (f32: exact integers). */
  blockIds: Float32Array;
  runs: PrefixRun[];
}

export const TOKENS_PER_SLOT = 4;

export function jointSequence(imgMask: ArrayLike<number | boolean>, imgShapes: readonly ImageShape[]): JointSequence {
  const bad = (why: string) => new RangeError(`qwen-image-2.1 joint sequence: ${why}`);
  if (imgShapes.length < 1) throw bad('img_shapes needs at least the target image');
  for (const [i, s] of imgShapes.entries()) {
    if (s.length !== 3 || !s.every((n) => Number.isInteger(n) && n > 0)) throw bad(`img_shapes[${i}] ${JSON.stringify(s)} must be 3 positive integers`);
    if (s[0] !== 1) throw bad(`img_shapes[${i}] has ${s[0]} frames; images have 1`);
    if ((s[1] * s[2]) % TOKENS_PER_SLOT) throw bad(`img_shapes[${i}] ${s[1]}x${s[2]} is not a whole number of 2x2 slots`);
  }
  const slots = Array.from(imgMask, (v) => !!v);
  const repeats = slots.map((s) => (s ? TOKENS_PER_SLOT : 1));
  const length = repeats.reduce((a, n) => a + n, 0);
  const isImage = new Uint8Array(length);
  const vlmOf = new Int32Array(length); // joint token -> VLM row
  for (let v = 0, j = 0; v < slots.length; v++) {
    for (let r = 0; r < repeats[v]!; r++, j++) {
      isImage[j] = slots[v] ? 1 : 0;
      vlmOf[j] = v;
    }
  }
  const imageTokens = isImage.reduce((a, n) => a + n, 0);
  const blockLengths = imgShapes.map(([, h, w]) => h * w);
  const wanted = blockLengths.reduce((a, n) => a + n, 0);
  if (wanted !== imageTokens) throw bad(`img_shapes account for ${wanted} image tokens but img_mask marks ${imageTokens} (${imageTokens / TOKENS_PER_SLOT} slots)`);

  const [, th, tw] = imgShapes[imgShapes.length - 1]!;
  const targetLength = th * tw;
  const prefixLength = length - targetLength;
  const frame = new Float64Array(length);
  const height = new Float64Array(length);
  const width = new Float64Array(length);
  const imageIds = new Int32Array(length).fill(-1);
  const runs: PrefixRun[] = [];
  let cursor = 0;
  let position = 0;
  let latent = 0;
  const textRun = (start: number, end: number) => {
    for (let j = start; j < end; j++) {
      if (isImage[j]) throw bad(`token ${j} is an image slot inside a text run`);
      frame[j] = height[j] = width[j] = position++;
    }
    if (end > start) runs.push({ kind: 'text', start, end, encoderStart: vlmOf[start]! });
  };
  imgShapes.forEach(([, h, w], b) => {
    let start = cursor;
    while (start < length && !isImage[start]) start++;
    if (start === length) throw bad(`no image tokens left for img_shapes[${b}]`);
    textRun(cursor, start);
    const end = start + h * w;
    for (let j = start; j < end; j++) {
      if (!isImage[j]) throw bad(`image ${b} (${h}x${w}) needs ${h * w} consecutive image tokens from token ${start}`);
      const k = j - start;
      frame[j] = position;
      height[j] = Math.floor(k / w) - (h - Math.floor(h / 2));
      width[j] = (k % w) - (w - Math.floor(w / 2));
      imageIds[j] = b;
    }
    position += Math.max(h, w);
    if (b < imgShapes.length - 1) runs.push({ kind: 'image', start, end, image: b, latentStart: latent });
    latent += h * w;
    cursor = end;
  });
  if (cursor !== length) throw bad(`${length - cursor} tokens follow the target image; the target must end the sequence`);

  const blockIds = new Float32Array(prefixLength);
  for (let j = 0, id = -1; j < prefixLength; j++) {
    if (imageIds[j]! < 0 || j === 0 || imageIds[j] !== imageIds[j - 1]) id++;
    blockIds[j] = id;
  }
  return {
    length,
    prefixLength,
    targetLength,
    encoderLength: slots.length - targetLength / TOKENS_PER_SLOT,
    referenceTokens: latent - targetLength,
    target: { height: th, width: tw },
    images: imgShapes.map((s) => [...s] as unknown as ImageShape),
    frame,
    height,
    width,
    imageIds,
    blockIds,
    runs,
  };
}

/** img_mask for a text encoder sequence (flags of its reference slots) plus the target's slots. */
export function imageMaskWithTarget(encoderSlots: ArrayLike<number | boolean>, target: { height: number; width: number }): boolean[] {
  const n = (target.height * target.width) / TOKENS_PER_SLOT;
  if (!Number.isInteger(n)) throw new RangeError(`qwen-image-2.1 joint sequence: target ${target.height}x${target.width} latents are not whole 2x2 slots`);
  return [...Array.from(encoderSlots, (v) => !!v), ...new Array<boolean>(n).fill(true)];
}

/** cos/sin [rows, pairs] of joint rows [start, end): axis a rotates axesDims[a] / 2 consecutive pairs. */
export interface RopeRows {
  rows: number;
  pairs: number;
  cos: Float32Array;
  sin: Float32Array;
}

/**
 * The rotary table for joint rows [start, end), in float32 arithmetic step by step as upstream computes it
 * (QwenImage21Rope.rope_params: inv = 1 / theta^(2k/d) in f32, angle = position * inv rounded to f32, then
 * cos/sin), so large positions (long prompts) land on the same angles as the reference.
 */
export function ropeRows(sequence: JointSequence, axesDims: readonly number[], theta: number, start = 0, end = sequence.length): RopeRows {
  if (!(start >= 0 && end <= sequence.length && start <= end)) throw new RangeError(`ropeRows: rows [${start}, ${end}) of ${sequence.length}`);
  const f = Math.fround;
  const inv: number[] = [];
  const axisOf: number[] = [];
  axesDims.forEach((d, a) => {
    for (let k = 0; k < d; k += 2) {
      inv.push(f(1 / f(theta ** f(k / d))));
      axisOf.push(a);
    }
  });
  const pairs = inv.length;
  const rows = end - start;
  const cos = new Float32Array(rows * pairs);
  const sin = new Float32Array(rows * pairs);
  const pos = [sequence.frame, sequence.height, sequence.width];
  for (let r = 0; r < rows; r++) {
    for (let j = 0; j < pairs; j++) {
      const angle = f(pos[axisOf[j]!]![start + r]! * inv[j]!);
      cos[r * pairs + j] = Math.cos(angle);
      sin[r * pairs + j] = Math.sin(angle);
    }
  }
  return { rows, pairs, cos, sin };
}
