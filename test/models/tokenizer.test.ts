// The Qwen BPE tokenizer against transformers' Qwen2Tokenizer: ids for a set of strings in many scripts,
// special tokens, whitespace runs and code (test/fixtures/tokenizer/*.golden.json, written by
// tools/golden/qwen3.py --tokenizer in the reference lab), from the real vocab.json + merges.txt (gzipped here)
// with the Qwen3-TTS and MiniMax H3 tokenizer_config.json files; and the demo tokenizer's round trip.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile, copyFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { gunzipSync } from 'node:zlib';
import { demoTokenizerInfo, TextTokenizer, writeDemoTokenizer, type TokenizerConfigJson } from '../../src/models/tokenizer';
import { repoRoot } from './golden';

const dir = () => join(repoRoot(), 'test', 'fixtures', 'tokenizer');
let files: { vocab: Record<string, number>; merges: string } | null = null;
function qwenFiles() {
  files ??= {
    vocab: JSON.parse(gunzipSync(readFileSync(join(dir(), 'qwen-vocab.json.gz'))).toString('utf8')),
    merges: gunzipSync(readFileSync(join(dir(), 'qwen-merges.txt.gz'))).toString('utf8'),
  };
  return files;
}
const readJson = <T>(name: string): T => JSON.parse(readFileSync(join(dir(), name), 'utf8')) as T;

interface Golden {
  upstream: string;
  vocab_size: number;
  added_tokens: Record<string, number>;
  cases: { text: string; ids: number[] }[];
}

for (const model of ['qwen3-tts', 'minimax-h3']) {
  test(`${model}: ids equal transformers' Qwen2Tokenizer`, () => {
    const golden = readJson<Golden>(`${model}.golden.json`);
    const tok = TextTokenizer.fromSources({ ...qwenFiles(), config: readJson<TokenizerConfigJson>(`${model}.tokenizer_config.json`) });
    assert.equal(tok.size, golden.vocab_size);
    for (const [t, id] of Object.entries(golden.added_tokens)) assert.equal(tok.tokenId(t), id, t);
    assert.ok(golden.cases.length >= 15);
    for (const c of golden.cases) {
      assert.deepEqual(tok.encode(c.text), c.ids, `${JSON.stringify(c.text)} (${golden.upstream})`);
      assert.equal(tok.decode(c.ids), c.text.normalize('NFC'), `decode ${JSON.stringify(c.text)}`);
    }
  });
}

test('special tokens: ids, isSpecial, skipped on decode', () => {
  const tok = TextTokenizer.fromSources({ ...qwenFiles(), config: readJson<TokenizerConfigJson>('qwen3-tts.tokenizer_config.json') });
  assert.equal(tok.tokenId('<|im_start|>'), 151644);
  assert.equal(tok.tokenId('<tts_pad>'), 151671);
  assert.ok(tok.isSpecial(151644));
  assert.ok(!tok.isSpecial(tok.tokenId('<think>'))); // added but not special
  const ids = tok.encode('<|im_start|>assistant\nHi<|im_end|>');
  assert.equal(tok.decode(ids, { skipSpecialTokens: true }), 'assistant\nHi');
  assert.throws(() => tok.tokenId('<no such token>'), /no token/);
});

test('fromDir: vocab.json + merges.txt, and a tokenizer.json built from them, give the same ids', async () => {
  const tmp = await mkdtemp(join(tmpdir(), 'kiln-tok-'));
  try {
    const { vocab, merges } = qwenFiles();
    const a = join(tmp, 'a');
    const b = join(tmp, 'b');
    for (const d of [a, b]) {
      await writeDemoTokenizer(d); // creates the folder; overwritten below
      await copyFile(join(dir(), 'qwen3-vl.tokenizer_config.json'), join(d, 'tokenizer_config.json'));
    }
    await writeFile(join(a, 'vocab.json'), JSON.stringify(vocab));
    await writeFile(join(a, 'merges.txt'), merges);
    const fromFiles = await TextTokenizer.fromDir(a);
    await writeFile(join(b, 'tokenizer.json'), JSON.stringify(fromFiles.json));
    const fromJson = await TextTokenizer.fromDir(b);
    const text = 'Describe the image: 一只猫 on a mat, 3 legs 🐈 <|vision_start|><|image_pad|><|vision_end|>';
    assert.deepEqual(fromJson.encode(text), fromFiles.encode(text));
    assert.equal(fromFiles.tokenId('<|image_pad|>'), 151655);
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
});

test('demo tokenizer: byte-level round trip of any text, merges used, special tokens after the vocabulary', async () => {
  const tmp = await mkdtemp(join(tmpdir(), 'kiln-demo-tok-'));
  try {
    const info = await writeDemoTokenizer(tmp);
    const again = await writeDemoTokenizer(join(tmp, 'again'));
    assert.deepEqual(again, info, 'deterministic');
    assert.deepEqual(demoTokenizerInfo(), info, 'the ids without writing (what the demo writers size their configs by)');
    const tok = await TextTokenizer.fromDir(tmp);
    assert.equal(tok.size, info.size);
    assert.ok(info.size > 256 + 100 && info.size < 1000, `size ${info.size}`);
    for (const [t, id] of Object.entries(info.specialTokens)) assert.equal(tok.tokenId(t), id);
    for (const text of ['The quick brown fox.', 'Grüße, 你好 🎉 \t\n  x', '<|im_start|>user\nhi<|im_end|>']) {
      const ids = tok.encode(text);
      assert.equal(tok.decode(ids), text);
      assert.ok(ids.every((i) => i >= 0 && i < info.size));
    }
    assert.ok(tok.encode('the quick brown').length < 'the quick brown'.length, 'merges shorten common words');
    assert.deepEqual(tok.encode('<|im_start|>'), [info.specialTokens['<|im_start|>']]);
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
});
