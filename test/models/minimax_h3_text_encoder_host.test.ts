// The MiniMax H3 text encoder's host copy (H3TextEncoderHost, src/models/minimax_h3/text-encoder/encoder.ts over
// src/models/common/host-weights.ts) on a tiny random bf16 Qwen3-VL checkpoint in the published sharded format: the
// second load reads no checkpoint file (the folder is renamed away and Checkpoint reads are counted) and its
// embeddings are bit-identical to the first load's and to a plain H3TextEncoder.fromDir's, in f32, f16 and int8;
// the GPU pool is back to its pre-load bytes after each free; the host bytes are exactly the prepared tensors'
// (compute dtype, or int8 q + f32 scales per output channel); drop() releases the copy so a load reads again.
import assert from 'node:assert/strict';
import { mkdtempSync, renameSync, rmSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Engine } from '../../src/engine/engine';
import { Checkpoint } from '../../src/engine/safetensors';
import { writeShardedSafetensors, type WriteTensor } from '../../src/engine/safetensors-writer';
import { H3TextEncoder, H3TextEncoderHost, type H3TextEncoderOptions } from '../../src/models/minimax_h3/text-encoder/encoder';
import { parseQwen3Config, type Qwen3Config } from '../../src/models/qwen3';
import { makeRng, testEngine, testSeed } from '../engine/helpers';

const LAYER = 3; // hidden_states[3] of a 4-layer decoder stands for [50] of 64
const RAW_CONFIG = {
  model_type: 'qwen3_vl',
  text_config: {
    model_type: 'qwen3_vl_text', vocab_size: 97, hidden_size: 32, intermediate_size: 48, num_hidden_layers: LAYER + 1,
    num_attention_heads: 4, num_key_value_heads: 2, head_dim: 8, rms_norm_eps: 1e-6, rope_theta: 5000000,
    rope_scaling: { rope_type: 'default', mrope_section: [2, 1, 1], mrope_interleaved: true },
  },
};

/** Every tensor of the decoder (all layers and the norm, as a real checkpoint holds them), as [key, shape, linear?]. */
function decoderTensors(c: Qwen3Config): [string, number[], boolean][] {
  const { hiddenSize: h, intermediateSize: f, numHeads: hq, numKvHeads: hkv, headDim: d, keyPrefix: p } = c;
  const out: [string, number[], boolean][] = [[`${p}embed_tokens.weight`, [c.vocabSize, h], false], [`${p}norm.weight`, [h], false]];
  for (let i = 0; i < c.numLayers; i++) {
    const l = `${p}layers.${i}.`;
    out.push(
      [`${l}self_attn.q_proj.weight`, [hq * d, h], true], [`${l}self_attn.k_proj.weight`, [hkv * d, h], true],
      [`${l}self_attn.v_proj.weight`, [hkv * d, h], true], [`${l}self_attn.o_proj.weight`, [h, hq * d], true],
      [`${l}self_attn.q_norm.weight`, [d], false], [`${l}self_attn.k_norm.weight`, [d], false],
      [`${l}mlp.gate_proj.weight`, [f, h], true], [`${l}mlp.up_proj.weight`, [f, h], true], [`${l}mlp.down_proj.weight`, [h, f], true],
      [`${l}input_layernorm.weight`, [h], false], [`${l}post_attention_layernorm.weight`, [h], false],
    );
  }
  return out;
}

/** What the copy must hold for layers < LAYER: plain tensors in the compute dtype, int8 linears as q + f32 scales. */
function expectedHostBytes(c: Qwen3Config, o: H3TextEncoderOptions): number {
  let n = 0;
  for (const [key, shape, linear] of decoderTensors(c)) {
    const m = /\.layers\.(\d+)\./.exec(key);
    if (!m || Number(m[1]) >= LAYER) continue;
    n += linear && o.int8 ? shape[0]! * shape[1]! + 4 * shape[0]! : shape.reduce((a, b) => a * b, 1) * (o.dtype === 'f16' ? 2 : 4);
  }
  return n;
}

const inUse = (e: Engine) => e.pool.stats().inUseBytes;

async function encodeBits(e: Engine, enc: H3TextEncoder, ids: number[]): Promise<Float32Array> {
  const out = enc.encode(ids);
  try {
    return await e.read(out);
  } finally {
    out.free();
  }
}

describe('H3TextEncoderHost: the text encoder rebuilt from host memory', () => {
  const root = mkdtempSync(join(tmpdir(), 'kiln-h3-te-host-'));
  const dir = join(root, 'text_encoder');
  const away = join(root, 'text_encoder.away');
  const config = parseQwen3Config(RAW_CONFIG, 'text');
  const seed = testSeed();
  const rng = makeRng(seed);
  const ids = Array.from({ length: 11 }, () => rng.int(0, config.vocabSize - 1));
  let e: Engine;

  before(async () => {
    e = await testEngine();
    const tensors: Record<string, WriteTensor> = {};
    for (const [key, shape, linear] of decoderTensors(config)) {
      const n = shape.reduce((a, b) => a * b, 1);
      // norms around 1, weights scaled so 4 layers keep the activations in range
      tensors[key] = { dtype: 'BF16', shape, data: linear ? rng.normal(n, 0.15) : shape.length === 1 ? rng.uniform(n, 0.5, 1.5) : rng.normal(n, 1) };
    }
    await writeShardedSafetensors(dir, tensors, 40_000);
    await writeFile(join(dir, 'config.json'), JSON.stringify(RAW_CONFIG));
  });
  after(() => rmSync(root, { recursive: true, force: true }));

  const modes: [string, H3TextEncoderOptions][] = [['f32', { dtype: 'f32' }], ['f32 int8', { dtype: 'f32', int8: true }], ['f16', { dtype: 'f16' }], ['f16 int8', { dtype: 'f16', int8: true }]];
  for (const [name, o] of modes) {
    test(`${name}: the second load reads no file and encodes bit-identically; the pool is back to its pre-load bytes (seed ${seed})`, async (t) => {
      if (o.dtype === 'f16' && !e.gpu.hasFeature('shader-f16')) return t.skip('no shader-f16 on this adapter');
      const plain = await H3TextEncoder.fromDir(e, dir, { ...o, layer: LAYER });
      const want = await encodeBits(e, plain, ids);
      plain.free();
      assert.ok(want.every(Number.isFinite) && want.some((v) => v !== 0), 'a real embedding');

      const host = new H3TextEncoderHost();
      const base = inUse(e);
      const first = await host.load(e, dir, { ...o, layer: LAYER });
      const tensors = decoderTensors(config).filter(([k]) => /\.layers\.[0-2]\./.test(k)).length;
      assert.deepEqual(host.counts, { read: tensors, replayed: 0 });
      assert.equal(host.bytes, expectedHostBytes(config, o));
      const a = await encodeBits(e, first, ids);
      first.free();
      assert.equal(inUse(e), base, 'first encoder freed: pool back to its pre-load bytes');

      // the folder gone and every Checkpoint read counted: the second load must come from host memory alone
      renameSync(dir, away);
      const reads = { open: 0, chunks: 0 };
      const { open } = Checkpoint;
      const { readChunks } = Checkpoint.prototype;
      Checkpoint.open = (p) => (reads.open++, open.call(Checkpoint, p));
      Checkpoint.prototype.readChunks = function (this: Checkpoint, ...args) {
        reads.chunks++;
        return readChunks.apply(this, args);
      };
      try {
        const second = await host.load(e, dir, { ...o, layer: LAYER });
        assert.deepEqual(host.counts, { read: tensors, replayed: tensors });
        const b = await encodeBits(e, second, ids);
        second.free();
        assert.equal(inUse(e), base, 'second encoder freed: pool back to its pre-load bytes');
        assert.deepEqual(reads, { open: 0, chunks: 0 }, 'no checkpoint opened or read');
        assert.ok(Buffer.from(b.buffer).equals(Buffer.from(a.buffer)), 'second encode bit-identical to the first');
        assert.ok(Buffer.from(a.buffer).equals(Buffer.from(want.buffer)), 'cached encode bit-identical to the plain loader');

        // drop(): the copy is gone, so the next load has to read the (missing) checkpoint again
        host.drop();
        assert.equal(host.bytes, 0);
        await assert.rejects(host.load(e, dir, { ...o, layer: LAYER }));
        assert.equal(inUse(e), base, 'a failed load leaves nothing on the GPU');
      } finally {
        Checkpoint.open = open;
        Checkpoint.prototype.readChunks = readChunks;
        renameSync(away, dir);
      }
    });
  }

  test('other options start over: the copy is for one dtype / int8 / layer', async () => {
    const host = new H3TextEncoderHost();
    (await host.load(e, dir, { dtype: 'f32', layer: LAYER })).free();
    const f32Bytes = host.bytes;
    (await host.load(e, dir, { dtype: 'f32', int8: true, layer: LAYER })).free();
    assert.equal(host.counts.replayed, 0, 'int8 weights read and quantised afresh');
    assert.ok(host.bytes < f32Bytes / 2, `int8 copy ${host.bytes} bytes vs f32 ${f32Bytes}`);
    (await host.load(e, dir, { dtype: 'f32', int8: true, layer: 2 })).free();
    assert.equal(host.counts.replayed, 0, 'another layer count: a fresh copy');
    assert.equal(host.bytes, expectedHostBytes(config, { dtype: 'f32', int8: true }) * 2 / 3);
    host.drop();
  });
});
