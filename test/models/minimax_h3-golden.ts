// Shared by the MiniMax H3 golden tests: a case's geometry inputs -> our packed sequence, and fixture decoding helpers.
import { buildPackedSequence, resolveGeometry, type Geometry, type KeyframeAnchor, type PackedSequence } from '../../src/models/minimax_h3/sequence/packed-sequence';
import type { GoldenCase } from './golden';

const ANCHORS: readonly KeyframeAnchor[] = ['first', 'last'];

/** The case's request (input.num_frames/height/width/text_token_tags/keyframe_anchors) through our own code. */
export async function caseSequence(c: GoldenCase): Promise<{ geometry: Geometry; packed: PackedSequence }> {
  const one = async (name: string) => (await c.ints(name)).data[0]!;
  const geometry = resolveGeometry(await one('num_frames'), await one('height'), await one('width'));
  const anchors = c.has('input', 'keyframe_anchors') ? (await c.ints('keyframe_anchors')).data.map((a) => ANCHORS[a]!) : [];
  const packed = buildPackedSequence({ ...geometry, textTags: (await c.ints('text_token_tags')).data, keyframeAnchors: anchors });
  return { geometry, packed };
}

/** output.position_bits: each float64 as 4 little-endian 16-bit words (stored exactly in F32). */
export function float64FromWords(words: ArrayLike<number>): Float64Array {
  const u16 = Uint16Array.from(words);
  return new Float64Array(u16.buffer);
}

/** How a case is run: compute dtype, int8 linears (tolerance key 'int8'). */
export interface Variant {
  name: string;
  dtype: 'f32' | 'f16';
  int8: boolean;
}
export const VARIANTS: readonly Variant[] = [
  { name: 'f32', dtype: 'f32', int8: false },
  { name: 'f16', dtype: 'f16', int8: false },
  { name: 'int8', dtype: 'f32', int8: true },
];
