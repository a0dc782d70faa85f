// Shards a model never reads (issue 44): an index entry's `reads` (tensor-name patterns) makes a shard holding none
// of them optional, so `pull` leaves it on the hub unless --all, the weights are real without it, and the engine's
// Checkpoint opens the index with it absent (asking for one of its tensors names the shard). MiniMax H3's text
// encoder is the case: it reads to decoder layer 49 of 64 and the vision tower, so 2 of its 14 shards (about 10 GB)
// are never needed; checked here on the real index (test/fixtures/golden/minimax_h3/configs, the file the manifest pins by sha256).
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Checkpoint, CheckpointError } from '../../src/engine/safetensors';
import { writeShardedSafetensors, type WriteTensor } from '../../src/engine/safetensors-writer';
import { H3_TEXT_ENCODER_LAYER } from '../../src/models/minimax_h3/text-encoder/encoder';
import { runCli } from '../../src/weights/cli';
import { loadCatalog, manifestsDir, parseManifest, WeightsCatalog } from '../../src/weights/manifest';
import { checkProfile, indexShardUse } from '../../src/weights/state';
import { repoRoot } from '../models/golden';
import { startHub, type Hub } from './hub-server';

test('the H3 text encoder\'s reads, on its real index: every layer below the tap, embeddings and vision tower; shards 12 and 13 unread', () => {
  const index = join(repoRoot(), 'test', 'fixtures', 'golden', 'minimax_h3', 'configs', 'text-encoder-index.json');
  const entry = loadCatalog(manifestsDir()).checkpoint('minimax-h3').components.text_encoder!.files.find((f) => f.shards)!;
  assert.equal(createHash('sha256').update(readFileSync(index)).digest('hex'), entry.sha256, 'the fixture is the index the manifest pins');
  const reads = entry.reads!.map((r) => new RegExp(r));
  for (const key of Object.keys((JSON.parse(readFileSync(index, 'utf8')) as { weight_map: Record<string, string> }).weight_map)) {
    const layer = /^model\.language_model\.layers\.(\d+)\./.exec(key);
    const want = layer ? Number(layer[1]) < H3_TEXT_ENCODER_LAYER : /^model\.(language_model\.embed_tokens|visual)\./.test(key);
    assert.equal(reads.some((re) => re.test(key)), want, key);
  }
  const unread = indexShardUse(index, entry.reads).filter((s) => !s.read).map((s) => s.shard);
  assert.deepEqual(unread, ['model-00012-of-00014.safetensors', 'model-00013-of-00014.safetensors']);
});

test('reads: only on an index with shards, and each a regular expression', () => {
  const manifest = (file: Record<string, unknown>) => JSON.stringify({
    model: 'm', checkpoints: { ck: { repo: 'a/b', revision: 'main', revisionNote: 'n', folder: 'F', components: { x: { files: [file] } } } },
    profiles: { p: { demo: 'd', variants: [{ name: 'v', uses: [{ checkpoint: 'ck', components: ['x'] }] }] } },
  });
  assert.throws(() => parseManifest('t.json', manifest({ path: 'config.json', reads: ['^a'] })), /reads: only an index with shards: true has reads/);
  assert.throws(() => parseManifest('t.json', manifest({ path: 'm.safetensors.index.json', shards: true, reads: ['(unclosed'] })), /reads\[0\]: not a regular expression/);
  assert.throws(() => parseManifest('t.json', manifest({ path: 'm.safetensors.index.json', shards: true, reads: [] })), /expected a non-empty array/);
});

describe('an index whose last shard the model never reads', () => {
  let hub: Hub;
  let root: string;
  let shards: string[];
  const cat = new WeightsCatalog([parseManifest('test.json', JSON.stringify({
    model: 'tiny',
    checkpoints: { enc: { repo: 'acme/enc', revision: 'main', revisionNote: 'test', folder: 'Enc', components: { text_encoder: { files: [{ path: 'model.safetensors.index.json', shards: true, reads: ['^layers\\.[0-3]\\.'] }] } } } },
    profiles: { enc: { demo: 'enc-demo', variants: [{ name: 'main', uses: [{ checkpoint: 'enc', components: ['text_encoder'] }] }] } },
  }))]);

  before(async () => {
    hub = await startHub();
    root = mkdtempSync(join(tmpdir(), 'kiln-reads-'));
    const t: Record<string, WriteTensor> = {};
    for (let i = 0; i < 6; i++) t[`layers.${i}.weight`] = { dtype: 'F32', shape: [32, 32], data: Float32Array.from({ length: 1024 }, (_, j) => i + j / 1024) };
    const src = join(root, 'src');
    await writeShardedSafetensors(src, t, 2 * 4096 + 100); // two layers a shard: layers 4-5 alone in the third
    shards = readdirSync(src).filter((f) => f.endsWith('.safetensors')).sort();
    assert.equal(shards.length, 3);
    for (const f of readdirSync(src)) hub.files.set(`acme/enc/${f}`, { data: readFileSync(join(src, f)) });
  });
  after(async () => {
    await hub.close();
    rmSync(root, { recursive: true, force: true });
  });

  const cli = async (args: string[]) => {
    const out: string[] = [];
    // the pull into WEIGHTS_DIR (--weights-dir): the default target is the hub cache
    const code = await runCli(args[0] === 'pull' ? [...args, '--weights-dir'] : args, { env: { WEIGHTS_DIR: join(root, 'weights'), DATA_DIR: join(root, 'data'), HF_ENDPOINT: hub.endpoint }, stdout: { write: (s: string) => out.push(s), isTTY: false }, stderr: { write: (s: string) => out.push(s) }, catalog: cat, retryDelayMs: 5, intervalMs: 0 });
    return { code, out: out.join('') };
  };

  test('pull leaves the unread shard on the hub; the weights are real; the engine opens the index without it', async () => {
    const r = await cli(['pull', 'enc']);
    assert.equal(r.code, 0, r.out);
    const dir = join(root, 'weights', 'Enc');
    assert.deepEqual(shards.map((s) => existsSync(join(dir, s))), [true, true, false]);
    assert.equal(hub.log.filter((q) => q.url.includes(shards[2]!)).length, 0, 'never asked the hub for it');
    const w = checkProfile('enc', join(root, 'weights'), cat);
    assert.equal(w.state, 'real', w.variant.problems.join('; '));
    const third = w.variant.components.text_encoder!.files.find((f) => f.path === shards[2])!;
    assert.deepEqual([third.optional, third.state], [true, 'missing']);

    const ck = await Checkpoint.open(dir);
    try {
      assert.equal((await ck.readFloat32('layers.3.weight'))[0], 3);
      assert.deepEqual(ck.keys().sort(), ['layers.0.weight', 'layers.1.weight', 'layers.2.weight', 'layers.3.weight']);
      assert.throws(() => ck.entry('layers.5.weight'), (e: Error) => e instanceof CheckpointError && e.message.includes(`tensor "layers.5.weight" is in ${shards[2]}, which is not on disk`));
    } finally {
      await ck.close();
    }
  });

  test('pull --all fetches it too', async () => {
    const r = await cli(['pull', 'enc', '--all']);
    assert.equal(r.code, 0, r.out);
    assert.ok(existsSync(join(root, 'weights', 'Enc', shards[2]!)));
    const ck = await Checkpoint.open(join(root, 'weights', 'Enc'));
    try {
      assert.equal((await ck.readFloat32('layers.5.weight'))[0], 5);
    } finally {
      await ck.close();
    }
  });
});
