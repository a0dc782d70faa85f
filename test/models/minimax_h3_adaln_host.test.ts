// The blocks' adaln_proj weights kept in host memory (the default) against the resident path, on the golden
// transformer case's tiny weights (2 blocks): the AdaLN tables are bit-identical in f32, f16 and int8 (the host
// keeps the very bytes the resident path uploads and the same GEMM runs on them), the pool holds the projections'
// bytes less after load, and building the tables costs one block's projection of GPU memory on top of the tables.
// The memory test runs first: the pool's peak only grows, so its measurements need a fresh process (node --test
// runs every file in its own).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DTYPE_BYTES } from '../../src/engine/dtype';
import type { Engine } from '../../src/engine/engine';
import { sizeClass } from '../../src/engine/memory';
import { isHostLinear, type AdaLNProjection } from '../../src/models/minimax_h3/transformer/blocks';
import { parseH3Config, type H3Config } from '../../src/models/minimax_h3/transformer/config';
import { MiniMaxH3Transformer } from '../../src/models/minimax_h3/transformer/transformer';
import { seeded, testEngine } from '../engine/helpers';
import { goldenCaseFiles, GoldenCase, WEIGHT_PREFIX } from './golden';
import { VARIANTS, type Variant } from './minimax_h3-golden';

const CASE = goldenCaseFiles('minimax_h3', 'transformer').find((f) => f.endsWith('t2va.safetensors'))!;

async function withCase(body: (c: GoldenCase, cfg: H3Config) => Promise<void>): Promise<void> {
  const c = await GoldenCase.open(CASE);
  try {
    await body(c, parseH3Config(c.config, `${c.path} config`));
  } finally {
    await c.close();
  }
}

const load = (e: Engine, c: GoldenCase, cfg: H3Config, v: Variant, adalnWeights: 'host' | 'gpu') =>
  MiniMaxH3Transformer.load(e, c.ckpt, cfg, { dtype: v.dtype, int8: v.int8, prefix: WEIGHT_PREFIX, adalnWeights });

/** Host -> GPU bytes of one block's adaln_proj (weight, plus scales when int8), and the pool bytes they take. */
function projectionBytes(cfg: H3Config, v: Variant): { raw: number; pooled: number } {
  const N = 18 * cfg.hiddenSize;
  const K = cfg.timeEmbedDim;
  const parts = v.int8 ? [N * K * DTYPE_BYTES.i8, N * DTYPE_BYTES[v.dtype]] : [N * K * DTYPE_BYTES[v.dtype]];
  return { raw: parts.reduce((a, b) => a + b, 0), pooled: parts.reduce((a, b) => a + sizeClass(Math.max(16, b)), 0) };
}

/** inUse bytes a model holds after load, and (withPeak) the peak rise while its tables for `ts` are built. */
async function measure(e: Engine, c: GoldenCase, cfg: H3Config, v: Variant, where: 'host' | 'gpu', ts: number[], withPeak: boolean) {
  const before = e.pool.stats().inUseBytes;
  const model = await load(e, c, cfg, v, where);
  try {
    const held = e.pool.stats().inUseBytes - before;
    const s0 = e.pool.stats();
    const tables = model.adaln(ts);
    const s1 = e.pool.stats();
    await e.sync();
    tables.free();
    if (withPeak) assert.ok(s1.peakInUseBytes > s0.peakInUseBytes, `${where}: the tables' peak is hidden by an earlier one (${s1.peakInUseBytes} <= ${s0.peakInUseBytes})`);
    return { held, rise: s1.peakInUseBytes - s0.inUseBytes, streamed: tables.streamedBytes };
  } finally {
    model.free();
  }
}

test('adaln_proj on the host: the pool holds the projections less after load, and the tables cost one block more at most', async () => {
  const e = await testEngine();
  await withCase(async (c, cfg) => {
    const ts = [0.25, 0.5, 1];
    for (const v of VARIANTS) {
      // the pool's peak never falls: it is measured on the first variant only, host first (its peak, resident
      // minus two blocks plus one, stays below the resident model's)
      const withPeak = v === VARIANTS[0];
      const host = await measure(e, c, cfg, v, 'host', ts, withPeak);
      const gpu = await measure(e, c, cfg, v, 'gpu', ts, withPeak);
      const one = projectionBytes(cfg, v);
      assert.equal(gpu.held - host.held, cfg.numLayers * one.pooled, `${v.name}: bytes the resident projections hold`);
      assert.equal(host.streamed, cfg.numLayers * one.raw, `${v.name}: bytes streamed per table build`);
      assert.equal(gpu.streamed, 0, `${v.name}: nothing streamed when resident`);
      if (!withPeak) continue;
      // the host path adds the stage (one block's projection) while the blocks' tables are built; it is freed
      // before norm_out's table, so its rise over the resident path's is in (0, one block]
      const extra = host.rise - gpu.rise;
      assert.ok(extra > 0 && extra <= one.pooled, `${v.name}: the peak rises ${extra} bytes more than resident; one block's projection is ${one.pooled}`);
    }
  });
});

test('adaln_proj on the host: the model keeps the exact bytes the resident path uploads', async () => {
  const e = await testEngine();
  await withCase(async (c, cfg) => {
    for (const v of VARIANTS) {
      const model = await load(e, c, cfg, v, 'host');
      try {
        const one = projectionBytes(cfg, v);
        for (const b of model.transformer_blocks) {
          const p: AdaLNProjection = b.adaln_proj.linear;
          assert.ok(isHostLinear(p), `${v.name}: adaln_proj is resident by default`);
          assert.equal(p.host.weight!.byteLength + (p.host.scales?.byteLength ?? 0), one.raw, v.name);
          assert.equal(p.host.weightDtype, v.int8 ? 'i8' : v.dtype, v.name);
          assert.ok(p.bias, `${v.name}: the bias stays on the GPU`);
        }
        assert.ok(!isHostLinear(model.norm_out.linear as AdaLNProjection), 'norm_out.linear stays resident');
      } finally {
        model.free();
      }
    }
  });
});

test(
  'adaln_proj on the host: the tables equal the resident tables bit for bit (f32, f16, int8; fresh timesteps)',
  seeded(async (rng) => {
    const e = await testEngine();
    await withCase(async (c, cfg) => {
      // the golden step's timesteps, then 1..3 fresh ones in (0, 1]
      const fresh = Array.from({ length: rng.int(1, 3) }, () => Math.fround(1 - rng.next()));
      const sets = [Array.from((await c.input('timestep')).data), fresh];
      for (const v of VARIANTS) {
        const host = await load(e, c, cfg, v, 'host');
        const gpu = await load(e, c, cfg, v, 'gpu');
        try {
          for (const ts of sets) {
            const a = host.adaln(ts);
            const b = gpu.adaln(ts);
            try {
              const label = `${v.name} t=${ts.join(',')}`;
              assert.deepEqual(await e.read(a.temb), await e.read(b.temb), `${label}: temb`);
              const tables: Float32Array[] = [];
              for (let n = 0; n < cfg.numLayers; n++) {
                assert.deepEqual(a.blocks[n]!.shape, b.blocks[n]!.shape);
                const got = await e.read(a.blocks[n]!);
                assert.ok(got.every(Number.isFinite), `${label}: block ${n} table not finite`);
                assert.deepEqual(got, await e.read(b.blocks[n]!), `${label}: block ${n} table`);
                tables.push(got);
              }
              // the blocks share one stage buffer: a write overtaking the previous block's GEMM would repeat a table
              for (let n = 1; n < tables.length; n++) assert.notDeepEqual(tables[n], tables[n - 1], `${label}: blocks ${n - 1} and ${n} got the same table`);
              assert.deepEqual(await e.read(a.normOut), await e.read(b.normOut), `${label}: norm_out`);
            } finally {
              a.free();
              b.free();
            }
          }
        } finally {
          host.free();
          gpu.free();
        }
      }
    });
  }),
);
