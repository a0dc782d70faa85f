// The talker prompt and the language ids against upstream: test/fixtures/golden/qwen3_tts/prompt/ holds, per
// case, what Qwen3TTSForConditionalGeneration.generate itself laid out (per position: text id, codec ids, speaker
// slot; the trailing text), for fixed token ids and the real 0.6B/1.7B config ids.
import { strict as assert } from 'node:assert';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { parseQwen3TtsConfig } from '../../src/models/qwen3_tts/config';
import { codecLanguageId, missingLanguages, TtsLanguageError } from '../../src/models/qwen3_tts/languages';
import { assistantText, buildTalkerPrompt, refText, TalkerPromptError, type PromptRequest, type TalkerPrompt } from '../../src/models/qwen3_tts/prompt';
import { TTS_LANGUAGES } from '../../src/catalog';
import { goldenTests, repoRoot, type GoldenCase } from './golden';

const realConfig = () =>
  parseQwen3TtsConfig(JSON.parse(readFileSync(join(repoRoot(), 'test', 'fixtures', 'qwen3_tts_configs', 'Qwen3-TTS-12Hz-1.7B-Base', 'config.json'), 'utf8')));

async function ints(c: GoldenCase, kind: 'input' | 'output', name: string): Promise<{ data: number[]; shape: number[] }> {
  const t = await c.tensor(kind, name);
  const data = Array.from(t.data);
  assert.ok(data.every(Number.isInteger), `${kind}.${name} holds non-integers`);
  return { data, shape: t.shape };
}

/** The prompt as the fixture stores it: per row text id (-1), 16 codec ids (-1), speaker flag. */
function flatten(p: TalkerPrompt, groups: number) {
  return {
    text: p.rows.map((r) => r.text ?? -1),
    codec: p.rows.flatMap((r) => Array.from({ length: groups }, (_, g) => r.codes[g] ?? -1)),
    speaker: p.rows.map((r) => (r.speaker ? 1 : 0)),
  };
}

goldenTests('qwen3_tts', 'prompt', async (c) => {
  const cfg = parseQwen3TtsConfig(c.config.model_config, c.path);
  const request = c.config.request as { language: string; mode: 'xvec' | 'icl'; non_streaming_mode: boolean };
  const req: PromptRequest = {
    inputIds: (await ints(c, 'input', 'input_ids')).data,
    languageId: codecLanguageId(cfg, request.language),
    mode: request.mode,
    nonStreaming: request.non_streaming_mode,
  };
  if (request.mode === 'icl') {
    req.refIds = (await ints(c, 'input', 'ref_ids')).data;
    const codes = await ints(c, 'input', 'ref_code');
    const [frames, groups] = codes.shape as [number, number];
    req.refCodes = Array.from({ length: frames }, (_, f) => codes.data.slice(f * groups, (f + 1) * groups));
  }
  const prompt = buildTalkerPrompt(cfg, req);
  const got = flatten(prompt, cfg.talker.numCodeGroups);
  assert.deepEqual(got.text, (await ints(c, 'output', 'text_ids')).data, 'text id per position');
  assert.deepEqual(got.codec, (await ints(c, 'output', 'codec_ids')).data, 'codec ids per position');
  assert.deepEqual(got.speaker, (await ints(c, 'output', 'speaker')).data, 'speaker slot');
  assert.deepEqual(prompt.trailingText, (await ints(c, 'output', 'trailing_text_ids')).data, 'trailing text');
  assert.deepEqual([prompt.ttsPad], (await ints(c, 'output', 'tts_pad_id')).data);
});

test('service languages map to the checkpoint ids; Auto has none; names are case-insensitive', () => {
  const cfg = realConfig();
  const want: Record<string, number | null> = {
    Auto: null, Chinese: 2055, English: 2050, Japanese: 2058, Korean: 2064, German: 2053,
    French: 2061, Russian: 2069, Portuguese: 2071, Spanish: 2054, Italian: 2070,
  };
  assert.deepEqual(Object.keys(want).sort(), [...TTS_LANGUAGES].sort());
  for (const [name, id] of Object.entries(want)) {
    assert.equal(codecLanguageId(cfg, name), id, name);
    assert.equal(codecLanguageId(cfg, name.toUpperCase()), id, name.toUpperCase());
  }
  assert.deepEqual(missingLanguages(cfg), []);
  assert.throws(() => codecLanguageId(cfg, 'Klingon'), TtsLanguageError);
  const partial = { talker: { ...cfg.talker, languageIds: { english: 2050 } } };
  assert.throws(() => codecLanguageId(partial, 'German'), /no codec language id for German/);
  assert.equal(missingLanguages(partial).length, 9);
});

test('prompt: template strings and rejected inputs', () => {
  const cfg = realConfig();
  assert.equal(assistantText('Hi'), '<|im_start|>assistant\nHi<|im_end|>\n<|im_start|>assistant\n');
  assert.equal(refText('Yo'), '<|im_start|>assistant\nYo<|im_end|>\n');
  const wrap = (text: number[]) => [151644, 77091, 198, ...text, 151645, 198, 151644, 77091, 198];
  const ok: PromptRequest = { inputIds: wrap([5, 6]), languageId: 2050, mode: 'xvec' };
  assert.equal(buildTalkerPrompt(cfg, ok).rows.length, 10);
  assert.equal(buildTalkerPrompt(cfg, { ...ok, languageId: null }).rows.length, 9);
  assert.throws(() => buildTalkerPrompt(cfg, { ...ok, inputIds: wrap([]) }), /hold no text/);
  assert.throws(() => buildTalkerPrompt(cfg, { ...ok, inputIds: [1, 77091, 198, 5, 151645, 198, 151644, 77091, 198] }), /expected id 151644 at 0/);
  const icl: PromptRequest = { ...ok, mode: 'icl', refIds: [151644, 77091, 198, 7, 151645, 198], refCodes: [Array(16).fill(3)] };
  assert.equal(buildTalkerPrompt(cfg, icl).rows.length, 9 + 2);
  assert.throws(() => buildTalkerPrompt(cfg, { ...icl, refCodes: [] }), /reference codes are missing/);
  assert.throws(() => buildTalkerPrompt(cfg, { ...icl, refCodes: [Array(15).fill(3)] }), /has 15 codes, not 16/);
  assert.throws(() => buildTalkerPrompt(cfg, { ...icl, refCodes: [Array(16).fill(2048)] }), /code 2048 is not a code/);
  assert.throws(() => buildTalkerPrompt(cfg, { ...icl, refIds: undefined }), TalkerPromptError);
});
