// MiniMax H3 FL2VA / Ref2VA text presentations (presentation.ts) against diffusers' text encoder steps (golden
// minimax_h3/presentation, tools/golden/minimax_h3_presentation.py): token ids and modality tags, on the golden's
// tokenizer (the demo BPE with the vision special tokens, rewritten here and checked against the recorded sha256).
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { fl2vaPresentation, formatFixed1, imageTokenCount, ref2vaPresentation, type PresentedReference } from '../../src/models/minimax_h3/text-encoder/presentation';
import { parseQwen3VlImageProcessorConfig, QWEN3_VL_IMAGE_PROCESSOR } from '../../src/models/qwen3_vl_vision/config';
import { TextTokenizer } from '../../src/models/tokenizer';
import { goldenDir, goldenTests } from './golden';
import { writePresentationTokenizer } from './minimax_h3-presentation-tokenizer';

const dir = mkdtempSync(join(tmpdir(), 'kiln-h3-presentation-'));
let tok: TextTokenizer;
let sha: Record<string, string>;
before(async () => {
  await writePresentationTokenizer(dir);
  tok = await TextTokenizer.fromDir(dir);
  sha = Object.fromEntries(readdirSync(dir).sort().map((f) => [f, createHash('sha256').update(readFileSync(join(dir, f))).digest('hex')]));
});
after(() => rmSync(dir, { recursive: true, force: true }));

interface Request {
  task: 'fl2va' | 'ref2va';
  prompt: string;
  keyframe_tokens?: number[];
  references?: { kind: 'image' | 'audio' | 'video'; vision_tokens?: number; has_audio?: boolean; timestamps?: number[] }[];
  tokenizer_sha256: Record<string, string>;
}

goldenTests('minimax_h3', 'presentation', async (c) => {
  const r = c.config as unknown as Request;
  assert.deepEqual(sha, r.tokenizer_sha256, 'the golden was made on another tokenizer: regenerate it (tools/golden/minimax_h3_presentation.py)');
  const got =
    r.task === 'fl2va'
      ? fl2vaPresentation(tok, r.prompt, r.keyframe_tokens!)
      : ref2vaPresentation(tok, r.prompt, r.references!.map((x): PresentedReference =>
        x.kind === 'image' ? { kind: 'image', visionTokens: x.vision_tokens! }
          : x.kind === 'audio' ? { kind: 'audio' }
            : { kind: 'video', hasAudio: !!x.has_audio, blocks: x.timestamps!.map((timestamp) => ({ timestamp, visionTokens: x.vision_tokens! })) }));
  assert.deepEqual(got.ids, Array.from((await c.output('token_ids')).data), 'token ids');
  assert.deepEqual(got.tags, Array.from((await c.output('token_tags')).data), 'token tags');
});

test('formatFixed1 is Python\'s "{:.1f}": exact ties to even, the rest by the exact binary value', () => {
  assert.deepEqual([0.25, 0.75, 1.25, 2.35, 0.15, 0.05, 12.5, 3, 0.96].map(formatFixed1), ['0.2', '0.8', '1.2', '2.4', '0.1', '0.1', '12.5', '3.0', '1.0']);
  assert.throws(() => formatFixed1(-1), /timestamp/);
});

test('vision tokens of the 32B\'s image processor: 1344 x 768 -> 1008, a 2048 reference -> 4096, small pictures scaled up', () => {
  const proc = parseQwen3VlImageProcessorConfig(JSON.parse(readFileSync(join(goldenDir('minimax_h3', 'configs'), 'processor-preprocessor-config.json'), 'utf8')));
  assert.deepEqual(proc, QWEN3_VL_IMAGE_PROCESSOR, 'the released processor is the default Qwen3-VL one');
  assert.equal(imageTokenCount(768, 1344, proc), 1008); // h3-conditioning.md 1.2
  assert.equal(imageTokenCount(2048, 2048, proc), 4096);
  assert.equal(imageTokenCount(64, 96, proc), 70); // below 65536 pixels smart_resize scales up: 224 x 320, 7 x 10
});
