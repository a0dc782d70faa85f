// Dawn's production toggles (engine/device.ts PRODUCTION_TOGGLES: skip_validation, disable_robustness; issue 43
// "Production settings"): they reach Dawn (a call validation refuses goes through unchecked), the GPU worker's
// default leaves a software adapter safe, and every kernel family gives bit-identical outputs with the bounds clamps
// off, at sizes no tile divides: a kernel that leaned on the clamps (an index past its binding) would differ or fault.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { gpuDeviceNodesPresent, PRODUCTION_TOGGLES } from '../../src/engine/device';
import { Engine } from '../../src/engine/engine';
import { attention } from '../../src/engine/ops/attention';
import { conv2d } from '../../src/engine/ops/conv';
import { add } from '../../src/engine/ops/elementwise';
import { linear } from '../../src/engine/ops/linear';
import { matmul } from '../../src/engine/ops/matmul';
import { layerNorm, rmsNorm } from '../../src/engine/ops/norm';
import { sum } from '../../src/engine/ops/reduce';
import { softmax } from '../../src/engine/ops/softmax';
import { engineSettings } from '../../src/engine/settings';
import { BufferUsage } from '../../src/engine/webgpu';
import type { Tensor } from '../../src/engine/tensor';
import { makeRng, testSeed } from './helpers';

/** An engine made with KILN_DAWN_TOGGLES=value (restored after). */
async function engineWith(value: string | undefined, opts: { production?: boolean } = {}): Promise<Engine> {
  const was = process.env.KILN_DAWN_TOGGLES;
  if (value === undefined) delete process.env.KILN_DAWN_TOGGLES;
  else process.env.KILN_DAWN_TOGGLES = value;
  try {
    return await Engine.create({ allowSoftware: true, ...opts });
  } finally {
    if (was === undefined) delete process.env.KILN_DAWN_TOGGLES;
    else process.env.KILN_DAWN_TOGGLES = was;
  }
}

/** Whether Dawn checks calls: a clear at an offset that is not a multiple of 4 is a validation error. */
async function validates(e: Engine): Promise<boolean> {
  const d = e.gpu.device;
  const b = d.createBuffer({ size: 64, usage: BufferUsage.STORAGE | BufferUsage.COPY_DST });
  d.pushErrorScope('validation');
  const enc = d.createCommandEncoder();
  enc.clearBuffer(b, 3, 8);
  d.queue.submit([enc.finish()]);
  const err = await d.popErrorScope();
  b.destroy();
  return err !== null;
}

describe('Dawn production toggles', () => {
  let safe: Engine;
  let fast: Engine;
  before(async () => {
    safe = await engineWith('safe', { production: true });
    fast = await engineWith('fast');
  });
  after(async () => {
    await safe?.shutdown();
    await fast?.shutdown();
  });

  test('fast: the toggles reach Dawn (validation is skipped); safe: checked; the worker\'s default: on a hardware adapter only', async () => {
    for (const t of PRODUCTION_TOGGLES) assert.ok(fast.describe().toggles.includes(t), t);
    assert.ok(!safe.describe().toggles.some((t) => PRODUCTION_TOGGLES.includes(t)), 'safe wins over the production option');
    assert.equal(await validates(fast), false, 'skip_validation on');
    assert.equal(await validates(safe), true);
    const dflt = await engineWith(undefined, { production: true });
    try {
      // here (lavapipe, no GPU device node) the worker's default stays safe; on a GPU (the GPU call's tests step) it is on
      const on = gpuDeviceNodesPresent() && !dflt.describe().software;
      assert.equal(PRODUCTION_TOGGLES.every((t) => dflt.describe().toggles.includes(t)), on, dflt.describe().toggles.join(','));
      assert.equal(await validates(dflt), !on);
    } finally {
      await dflt.shutdown();
    }
    assert.throws(() => engineSettings({ KILN_DAWN_TOGGLES: 'turbo' }), /KILN_DAWN_TOGGLES=turbo: must be fast .* or safe/);
  });

  test('every kernel family\'s output is bit-identical with the bounds clamps off (unaligned sizes, GQA, broadcast)', async () => {
    const seed = testSeed();
    const rng = makeRng(seed);
    const [M, K, N] = [rng.int(33, 70), rng.int(33, 90), rng.int(33, 70)];
    const [H, Hkv, Lq, Lk, D] = [4, 2, rng.int(17, 50), rng.int(17, 60), 64];
    const [Hh, Ww, Cin, Cout] = [rng.int(5, 13), rng.int(5, 13), 3, 5];
    const data = {
      a: rng.uniform(M * K), w: rng.uniform(N * K), bias: rng.uniform(N), b: rng.uniform(K * N),
      q: rng.uniform(H * Lq * D), k: rng.uniform(Hkv * Lk * D), v: rng.uniform(Hkv * Lk * D),
      img: rng.uniform(Hh * Ww * Cin), kern: rng.uniform(Cout * Cin * 9), row: rng.uniform(N),
    };
    const run = async (e: Engine): Promise<Float32Array[]> => {
      const up = (x: Float64Array, shape: number[], dt: 'f16' | 'f32' = 'f16') => e.upload(Float32Array.from(x), shape, dt);
      const a = up(data.a, [M, K]);
      const outs: Tensor[] = [
        linear(e, a, up(data.w, [N, K]), up(data.bias, [N])),
        linear(e, up(data.a.subarray(0, K), [1, K]), up(data.w, [N, K])),   // the GEMV path
        matmul(e, up(data.a, [M, K], 'f32'), up(data.b, [K, N], 'f32')),
        attention(e, up(data.q, [1, H, Lq, D]), up(data.k, [1, Hkv, Lk, D]), up(data.v, [1, Hkv, Lk, D]), { path: 'flash' }),
        conv2d(e, up(data.img, [1, Hh, Ww, Cin], 'f32'), up(data.kern, [Cout, Cin, 3, 3], 'f32'), { padding: 1 }),
        softmax(e, up(data.a, [M, K], 'f32')),
        layerNorm(e, a),
        rmsNorm(e, a),
        sum(e, up(data.a, [M, K], 'f32')),
        add(e, up(data.b, [K, N], 'f32'), up(data.row, [N], 'f32')),
      ];
      const got = [];
      for (const o of outs) got.push(Float32Array.from(await e.read(o)));
      return got;
    };
    const [want, got] = [await run(safe), await run(fast)];
    const names = ['linear', 'gemv', 'matmul f32', 'attention GQA', 'conv2d', 'softmax', 'layerNorm', 'rmsNorm', 'sum', 'add broadcast'];
    for (let i = 0; i < want.length; i++) {
      assert.equal(got[i]!.length, want[i]!.length, names[i]);
      assert.ok(want[i]!.every((x) => Number.isFinite(x)), `${names[i]}: finite (seed ${seed})`);
      assert.deepEqual(got[i], want[i], `${names[i]} differs with robustness off (seed ${seed})`);
    }
  });
});
