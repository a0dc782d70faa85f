// The int8 cache (engine/int8-cache.ts) under the models' loaders, on the demo and golden checkpoints: MiniMax H3's
// turbo adapter merged at load (a computed view, turbo_int8 / fastvid_4step_int8) is cached under the base weight's,
// the delta's and the strength's identity, bit-identical to a fresh quantisation; and an int8 image job (imgmain on
// the Qwen-Image demo checkpoint) gives the same png with the cache off, while it fills, and read from it.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { int8CacheStats, resetInt8CacheStats, useInt8Cache } from '../../src/engine/int8-cache';
import { quantizeInt8PerChannel, type QuantizedInt8 } from '../../src/engine/quantize';
import { quantizeInt8FromCheckpoint } from '../../src/engine/quantize-parallel';
import { mergeAdapter, openH3Adapter, writeDemoAdapter } from '../../src/models/minimax_h3/transformer/adapter';
import { parseH3Config } from '../../src/models/minimax_h3/transformer/config';
import { openH3Weights } from '../../src/models/minimax_h3/transformer/native-checkpoint';
import { planDemoQwenImage21 } from '../../src/models/qwen_image21/demo';
import { QwenImage21Pipeline, type QwenImageTask } from '../../src/models/qwen_image21/pipeline';
import { testEngine } from '../engine/helpers';
import { GoldenCase, goldenCaseFiles, WEIGHT_PREFIX } from './golden';
import { recordingContext } from './run-context';

const scratch = mkdtempSync(join(tmpdir(), 'kiln-int8-cache-models-'));
after(() => {
  useInt8Cache(undefined);
  rmSync(scratch, { recursive: true, force: true });
});

const bytes = (q: QuantizedInt8) => Buffer.concat([Buffer.from(q.q.buffer, q.q.byteOffset, q.q.byteLength), Buffer.from(q.scales.buffer, q.scales.byteOffset, q.scales.byteLength)]);

test('H3 turbo adapter merged at load: cached per merged weight, bit-identical; another strength or adapter is another entry', async () => {
  const c = await GoldenCase.open(goldenCaseFiles('minimax_h3', 'transformer')[0]!);
  const cfg = parseH3Config(c.config, c.path);
  const adapterFile = join(scratch, 'turbo.safetensors');
  await writeDemoAdapter(adapterFile, cfg, { rank: 3, seed: 7, magnitude: 0.5 });
  const source = await openH3Weights(c.path, { prefix: WEIGHT_PREFIX });
  const adapter = await openH3Adapter(adapterFile, cfg);
  try {
    const merged = mergeAdapter(source, adapter).checkpoint();
    const half = mergeAdapter(source, adapter, { strength: 0.5 }).checkpoint();
    // adapted (computed) and plain (passed through to the file) linears of the first block
    const keys = ['transformer_blocks.0.attn.to_q.weight', 'transformer_blocks.0.ff.net.0.proj.weight', 'transformer_blocks.0.attn.norm_q.weight'].map((k) => WEIGHT_PREFIX + k);
    const linears = keys.filter((k) => merged.entry(k).shape.length === 2);
    assert.ok(linears.length >= 2);
    const plain = WEIGHT_PREFIX + 'proj_out.weight';
    linears.push(plain);

    useInt8Cache(null);
    const want = new Map<string, Buffer>();
    for (const k of linears) {
      const [N, K] = merged.entry(k).shape as [number, number];
      const q = await quantizeInt8FromCheckpoint(merged, k, N, K);
      assert.ok(bytes(q).equals(bytes(quantizeInt8PerChannel(await merged.readFloat32(k), N, K))), `${k}: the pool's bytes are the one-thread bytes`);
      want.set(k, bytes(q));
    }
    useInt8Cache(join(scratch, 'h3-cache'));
    resetInt8CacheStats();
    for (let load = 0; load < 2; load++) {
      for (const k of linears) {
        const [N, K] = merged.entry(k).shape as [number, number];
        assert.ok(bytes(await quantizeInt8FromCheckpoint(merged, k, N, K)).equals(want.get(k)!), `${k}, load ${load + 1}`);
      }
    }
    assert.deepEqual([int8CacheStats().written, int8CacheStats().hits], [linears.length, linears.length], 'written once, then read');

    // the same keys merged at another strength: new values, not the first strength's entries
    resetInt8CacheStats();
    const k = linears[0]!;
    const [N, K] = half.entry(k).shape as [number, number];
    const q = await quantizeInt8FromCheckpoint(half, k, N, K);
    assert.ok(bytes(q).equals(bytes(quantizeInt8PerChannel(await half.readFloat32(k), N, K))));
    assert.ok(!bytes(q).equals(want.get(k)!), 'strength 0.5 quantises other values');
    assert.equal(int8CacheStats().hits, 0);
    // the plain weight is the file's own tensor, with or without the adapter: one entry
    resetInt8CacheStats();
    const [pn, pk] = source.view.entry(plain).shape as [number, number];
    assert.ok(bytes(await quantizeInt8FromCheckpoint(source.view, plain, pn, pk)).equals(want.get(plain)!));
    assert.equal(int8CacheStats().hits, 1, 'a passed-through tensor is keyed by its file');
  } finally {
    await source.close();
    useInt8Cache(undefined);
  }
});

test('imgmain (int8) on the Qwen-Image demo checkpoint: the same png with the cache off, filling it, and read from it', async () => {
  const e = await testEngine();
  const dir = join(scratch, 'qwen-demo');
  await (await planDemoQwenImage21(e)).write(dir);
  let n = 0;
  const task = (): QwenImageTask => ({
    prompt: 'a red kiln at dusk', negative: '', cfg: 1, seed: 3, steps: 2, width: 256, height: 192, references: [], referenceArea: 512 * 512,
    outputPath: join(scratch, `out-${++n}.png`), png: { prompt: 'a red kiln at dusk', profile: 'imgmain', seed: 3, steps: 2 },
  });
  const job = async (cache: string | null): Promise<Buffer> => {
    useInt8Cache(cache);
    const pipeline = new QwenImage21Pipeline({ engine: testEngine, checkpoint: async () => dir, int8: true });
    try {
      const t = task();
      await pipeline.run(t, recordingContext());
      return readFileSync(t.outputPath);
    } finally {
      await pipeline.unload();
    }
  };
  try {
    const off = await job(null);
    resetInt8CacheStats();
    const filling = await job(join(scratch, 'qwen-cache'));
    const written = int8CacheStats().written;
    assert.ok(written > 10, `the int8 linears were written (${written})`);
    assert.equal(int8CacheStats().hits, 0);
    resetInt8CacheStats();
    const cached = await job(join(scratch, 'qwen-cache'));
    assert.deepEqual([int8CacheStats().hits, int8CacheStats().written], [written, 0], 'every int8 linear read from the cache');
    assert.ok(filling.equals(off), 'the first load with the cache on gives the same png');
    assert.ok(cached.equals(off), 'a load from the cache gives the same png');
  } finally {
    useInt8Cache(undefined);
  }
});
