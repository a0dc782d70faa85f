// The tokenizer of the MiniMax H3 presentation golden (minimax_h3/presentation): the demo byte-level BPE with the
// vision special tokens the FL2VA / Ref2VA presentations use. Deterministic; the fixtures record the files' sha256.
//   node build/golden/test/models/minimax_h3-presentation-tokenizer.js <dir>
// (after `npx tsc -p tsconfig.test.json --outDir build/golden`; tools/golden/minimax_h3_presentation.py has the recipe)
import { DEMO_SPECIAL_TOKENS, writeDemoTokenizer } from '../../src/models/tokenizer/demo';

export const PRESENTATION_SPECIAL_TOKENS = [...DEMO_SPECIAL_TOKENS, '<|vision_start|>', '<|vision_end|>', '<|image_pad|>', '<|video_pad|>'];

export async function writePresentationTokenizer(dir: string): Promise<void> {
  await writeDemoTokenizer(dir, { specialTokens: PRESENTATION_SPECIAL_TOKENS });
}

if (require.main === module) {
  const dir = process.argv[2];
  if (!dir) throw new Error('usage: minimax_h3-presentation-tokenizer.js <dir>');
  void writePresentationTokenizer(dir);
}
