// BigVGAN's anti-aliased resampling: the Kaiser-sinc filter (src/engine/filters.ts) against upstream's values and
// an independent closed-form computation; UpSample1d/DownSample1d/Activation1d on the GPU against the float64
// reference, and the reference itself against upstream outputs.
//
// Golden numbers: NVIDIA/BigVGAN alias_free_activation/torch (filter.py, resample.py) run in the reference lab
// with torch 2.14 and torch.set_default_dtype(torch.float64):
//   kaiser_sinc_filter1d(cutoff, half_width, kernel_size).flatten()
//   UpSample1d(ratio, kernel_size)(x) / DownSample1d(ratio, kernel_size)(x), x[0, c, t] = sin(0.7 t + c) + 0.1 t,
//   x of shape [1, 2, 7] (B, C, T); outputs listed channel by channel.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { DType } from '../../src/engine/dtype';
import { besselI0, kaiserSincFilter1d, kaiserWindow } from '../../src/engine/filters';
import {
  Activation1d, createDownSample1d, createUpSample1d, defaultKernelSize, downSample1d, upSample1d,
} from '../../src/engine/ops/resample_alias_free';
import { snakeRef } from './reference/activation';
import { downSample1dRef, upSample1dRef } from './reference/resample';
import { assertClose, poisoned, randomHost, seeded, testEngine, uploadAs, type HostTensor, type Layout } from './helpers';

const GOLDEN_FILTERS: [number, number, number, number[]][] = [
  [0.25, 0.3, 12, [0.0020289664498962423, 0.00938946394406788, -0.02554346406529466, -0.05765737547536495, 0.12857260908132875, 0.4432098000653667, 0.4432098000653667, 0.12857260908132875, -0.05765737547536495, -0.02554346406529466, 0.00938946394406788, 0.0020289664498962423]],
  [0.25, 0.3, 11, [0.007443767977516884, -6.021136013241904e-18, -0.05779342334344675, 1.5090090282816013e-17, 0.29967502204416774, 0.5013492666435243, 0.29967502204416774, 1.5090090282816013e-17, -0.05779342334344675, -6.021136013241904e-18, 0.007443767977516884]],
  [0.25, 0.3, 6, [-0.05748202448956993, 0.12654425519333484, 0.4309377692962351, 0.4309377692962351, 0.12654425519333484, -0.05748202448956993]],
  [0.25, 0.3, 4, [0.125, 0.37499999999999994, 0.37499999999999994, 0.125]],
  [0.125, 0.15, 24, [0.00034386726002635936, 0.002217552736164982, 0.004509537576236012, 0.003322114166756927, -0.005445119441536373, -0.020424873386109106, -0.030684484202600344, -0.018802266933639, 0.028016898977759115, 0.10547913025251135, 0.18867132786354854, 0.2427963151308815, 0.2427963151308815, 0.18867132786354854, 0.10547913025251135, 0.028016898977759115, -0.018802266933639, -0.030684484202600344, -0.020424873386109106, -0.005445119441536373, 0.003322114166756927, 0.004509537576236012, 0.002217552736164982, 0.00034386726002635936]],
  [0.5 / 3, 0.2, 9, [-0.043899892810434916, 1.0050766171910849e-17, 0.12123623098343, 0.26101448523313464, 0.32329835318774075, 0.26101448523313464, 0.12123623098343, 1.0050766171910849e-17, -0.043899892810434916]],
];

// [kind, ratio, kernel size (undefined: upstream default), [C=2, L'] outputs]
const GOLDEN_RESAMPLE: ['up' | 'down', number, number | undefined, number[]][] = [
  ['up', 2, 12, [-0.0635578022624792, 0.135531259945169, 0.544833129168327, 0.908079613450855, 1.12184498622844, 1.22715754957599, 1.21595167111049, 1.08864097699095, 0.870773832014136, 0.590776493912736, 0.292869832722331, 0.0122950454329576, -0.20897097865054, -0.301197168593624, 0.813258283106904, 0.902042052439831, 1.04994048978869, 1.09325214935428, 0.973802820271617, 0.762665807272923, 0.491012632128863, 0.191097333570578, -0.0905106829976464, -0.320208014689998, -0.464304506955767, -0.452005619024624, -0.334481540117505, -0.259730381677545]],
  ['up', 3, undefined, [-0.0646612824340214, -0.0498125295448672, 0.0828536039407905, 0.329280786785446, 0.615132828980472, 0.857995249262288, 1.03039143016109, 1.14590943635525, 1.21637851497552, 1.23682795025253, 1.20140280271856, 1.11628402872045, 0.989333869777714, 0.826987509103677, 0.640034691097757, 0.441063544583435, 0.24443191673859, 0.0573653832390989, -0.110858719992302, -0.233660774545431, -0.294586766988724, 0.813436459654521, 0.819535250332456, 0.879301933164252, 0.97830142783726, 1.068341772175, 1.09797221256016, 1.04902748553686, 0.943016301697673, 0.802384169047151, 0.632541176156806, 0.441692426371724, 0.24146280478159, 0.0449617473041254, -0.132442928994904, -0.285475034815441, -0.407878674742411, -0.473355852588874, -0.464435023785981, -0.397511019507329, -0.31505367844477, -0.264612298545269]],
  ['up', 2, 11, [-0.0683733502383292, 8.18511605872776e-18, 0.326341828731251, 0.746225983439512, 1.03303671137469, 1.18864870554496, 1.23891366483575, 1.16634832584458, 0.990451346506765, 0.736971540144687, 0.440492475107298, 0.149619438737446, -0.113626020372478, -0.272308628675402, 0.810787192014839, 0.843741722270486, 0.977782741910159, 1.09461070428177, 1.05162642633575, 0.877825647085454, 0.633159356175816, 0.342502429221079, 0.0437857786184799, -0.212429596513552, -0.411089786980429, -0.478818748583185, -0.397979289070921, -0.284219567543983]],
  ['down', 2, 12, [0.397269241846466, 1.2263666519857, 0.438662489728384, -0.296416894451014, 0.997790688167742, 0.623658954783896, -0.34647658335697, -0.314829404460195]],
  ['down', 3, undefined, [0.503021885467245, 0.907585517959399, -0.240121618442824, 0.981072101213491, 0.124959736682258, -0.381670585821326]],
  ['down', 2, 11, [0.156908335496246, 1.15528730206334, 0.732449960884852, -0.220834571419411, 0.935519859880638, 0.8515410476991, -0.189510941791782, -0.367501084555829]],
];

/** The golden input, channels-last [1, 7, 2]. */
function goldenInput(): HostTensor {
  const data = new Float64Array(14);
  for (let t = 0; t < 7; t++) for (let c = 0; c < 2; c++) data[t * 2 + c] = Math.sin(0.7 * t + c) + 0.1 * t;
  return { data, shape: [1, 7, 2] };
}

/** Upstream output listed channel by channel ([C, L']) as channels-last [1, L', C]. */
function channelsLast(v: number[], C: number): HostTensor {
  const L = v.length / C;
  const data = new Float64Array(v.length);
  for (let c = 0; c < C; c++) for (let t = 0; t < L; t++) data[t * C + c] = v[c * L + t]!;
  return { data, shape: [1, L, C] };
}

// ---- an independent closed form: I0 by numerical integration, the window and sinc written out again ----

/** I0(x) = (1/pi) * integral_0^pi exp(x cos(theta)) dtheta, composite Simpson with 4000 panels. */
function i0Integral(x: number): number {
  const n = 4000;
  const h = Math.PI / n;
  let s = 0;
  for (let i = 0; i <= n; i++) s += (i === 0 || i === n ? 1 : i % 2 ? 4 : 2) * Math.exp(x * Math.cos(i * h));
  return (s * h) / 3 / Math.PI;
}

function closedFormFilter(cutoff: number, halfWidth: number, n: number): number[] {
  const half = Math.floor(n / 2);
  const A = 2.285 * (half - 1) * Math.PI * 4 * halfWidth + 7.95;
  const beta = A > 50 ? 0.1102 * (A - 8.7) : A >= 21 ? 0.5842 * Math.pow(A - 21, 0.4) + 0.07886 * (A - 21) : 0;
  const raw = Array.from({ length: n }, (_, i) => {
    const win = n === 1 ? 1 : i0Integral(beta * Math.sqrt(1 - Math.pow((2 * i) / (n - 1) - 1, 2))) / i0Integral(beta);
    const t = n % 2 === 0 ? i + 0.5 - half : i - half;
    const arg = Math.PI * 2 * cutoff * t;
    return 2 * cutoff * win * (t === 0 ? 1 : Math.sin(arg) / arg);
  });
  const total = raw.reduce((a, b) => a + b, 0);
  return raw.map((v) => v / total);
}

test('kaiserSincFilter1d matches upstream (torch float64) and an independent closed form', () => {
  for (const [cutoff, hw, n, want] of GOLDEN_FILTERS) {
    const got = kaiserSincFilter1d(cutoff, hw, n);
    assertClose(got, { data: Float64Array.from(want), shape: [n] }, { atol: 1e-15, rtol: 1e-12 }, `filter vs upstream (${cutoff}, ${hw}, ${n})`);
  }
  for (const [cutoff, hw, n] of [[0.25, 0.3, 12], [0.25, 0.3, 11], [0.25, 0.3, 2], [0.25, 0.3, 1], [0.5 / 8, 0.6 / 8, 48], [0.1, 0.05, 7], [0.5, 0.6, 5]] as const) {
    const got = kaiserSincFilter1d(cutoff, hw, n);
    assertClose(got, { data: Float64Array.from(closedFormFilter(cutoff, hw, n)), shape: [n] }, { atol: 1e-13, rtol: 1e-11 }, `filter vs closed form (${cutoff}, ${hw}, ${n})`);
    assert.ok(Math.abs(got.reduce((a, b) => a + b, 0) - 1) < 1e-14, 'normalised to sum 1');
  }
  assert.deepEqual([...kaiserSincFilter1d(0, 0.3, 5)], [0, 0, 0, 0, 0]);
  for (const x of [0, 0.5, 3, 7.86, 20]) assert.ok(Math.abs(besselI0(x) / i0Integral(x) - 1) < 1e-13, `I0(${x})`);
  assert.deepEqual([...kaiserWindow(1, 5)], [1]);
  assert.throws(() => kaiserSincFilter1d(0.6, 0.3, 12), /kaiserSincFilter1d: cutoff 0.6 must be in \[0, 0.5\]/);
  assert.throws(() => kaiserSincFilter1d(0.25, 0.3, 0), /kaiserSincFilter1d: kernelSize 0 must be a positive integer/);
});

test('alias-free reference and GPU (f32) reproduce upstream UpSample1d/DownSample1d outputs', async () => {
  const e = await testEngine();
  const x = goldenInput();
  const gx = e.upload(x.data, x.shape, 'f32');
  for (const [kind, ratio, k, values] of GOLDEN_RESAMPLE) {
    const want = channelsLast(values, 2);
    const K = k ?? defaultKernelSize(ratio);
    const taps = kaiserSincFilter1d(0.5 / ratio, 0.6 / ratio, K);
    const ref = kind === 'up' ? upSample1dRef(x, ratio, taps) : downSample1dRef(x, ratio, taps);
    assertClose(ref.data, want, { atol: 1e-13, rtol: 1e-12 }, `reference ${kind} ${ratio} ${k}`);
    const r = kind === 'up' ? createUpSample1d(e, ratio, k) : createDownSample1d(e, ratio, k);
    const out = kind === 'up' ? upSample1d(e, gx, r) : downSample1d(e, gx, r);
    assert.deepEqual(out.shape, want.shape);
    assertClose(await e.read(out), want, 'f32', `GPU ${kind} ${ratio} ${k}`);
    out.free();
    r.free();
  }
  gx.free();
});

for (const dtype of ['f32', 'f16'] as DType[]) {
  test(`upSample1d/downSample1d ${dtype}: ratios 2 and 3, even and odd kernels, odd lengths, strided x`, seeded(async (rng) => {
    const e = await testEngine();
    for (const [ratio, K] of [[2, 12], [2, 11], [3, 18], [2, 4], [4, 24]] as const) {
      for (const layout of ['contiguous', 'transposed', 'sliced'] as Layout[]) {
        const x = randomHost(rng, [rng.int(1, 2), rng.int(1, 40), rng.int(1, 9)], dtype);
        const gx = uploadAs(e, x, dtype, layout);
        const up = createUpSample1d(e, ratio, K);
        const down = createDownSample1d(e, ratio, K);
        const wantUp = upSample1dRef(x, ratio, up.taps);
        const wantDown = downSample1dRef(x, ratio, down.taps);
        const ou = poisoned(e, wantUp.shape, dtype);
        const od = poisoned(e, wantDown.shape, dtype);
        upSample1d(e, gx.view, up, ou);
        downSample1d(e, gx.view, down, od);
        const lbl = `${dtype} R${ratio} K${K} x${JSON.stringify(x.shape)} ${layout}`;
        assertClose(await e.read(ou), wantUp, dtype, `upSample1d ${lbl}`);
        assertClose(await e.read(od), wantDown, dtype, `downSample1d ${lbl}`);
        for (const t of [ou, od, gx.base, up, down]) t.free();
      }
    }
  }));

  test(`Activation1d ${dtype}: upsample 2x, snake / snake-beta (log scale), downsample 2x`, seeded(async (rng) => {
    const e = await testEngine();
    const act = Activation1d.create(e);
    for (const withBeta of [false, true]) {
      const C = rng.int(1, 9);
      const x = randomHost(rng, [2, rng.int(3, 33), C], dtype);
      const alpha = randomHost(rng, [C], dtype, -0.5, 0.5);
      const beta = randomHost(rng, [C], dtype, -0.5, 0.5);
      const [gx, ga, gb] = [x, alpha, beta].map((h) => e.upload(h.data, h.shape, dtype));
      const out = act.forward(e, gx!, ga!, { beta: withBeta ? gb : undefined, logScale: true });
      const up = upSample1dRef(x, 2, act.up.taps);
      const want = downSample1dRef(snakeRef(up, 2, alpha, withBeta ? beta : undefined, true), 2, act.down.taps);
      // f16: the upsampled and the snake outputs are rounded to f16 before the next stage (values up to ~3).
      assertClose(await e.read(out), want, dtype === 'f16' ? { atol: 2e-2, rtol: 1e-2 } : dtype, `Activation1d ${dtype} beta ${withBeta}`);
      for (const t of [gx, ga, gb, out]) t!.free();
    }
    act.free();
  }));
}

test('alias-free resampling: input checks name the op and the shapes', async () => {
  const e = await testEngine();
  const up = createUpSample1d(e);
  const down = createDownSample1d(e);
  assert.throws(() => upSample1d(e, e.empty([4, 3]), up), /upSample1d: x f32\[4,3\] must be channels-last \[N, L, C\]/);
  assert.throws(() => upSample1d(e, e.empty([1, 4, 3]), down), /upSample1d: got a downsampler \(make it with createUpSample1d\)/);
  assert.throws(() => downSample1d(e, e.empty([1, 4, 3]), down, e.empty([1, 3, 3])), /downSample1d: out f32\[1,3,3\] must be a contiguous f32\[1,2,3\]/);
  assert.throws(() => createUpSample1d(e, 4, 3), /UpSample1d: kernelSize 3 must be >= ratio 4/);
  assert.throws(() => createDownSample1d(e, 1.5), /DownSample1d: ratio 1.5 must be an integer >= 1/);
  up.free();
  down.free();
});

test('alias-free resampling: given taps (a checkpoint\'s stored filter) are the ones used', seeded(async (rng) => {
  const e = await testEngine();
  // the float32 rounding of our own taps with a perturbation, as a stored buffer may differ from ours
  const taps = Float64Array.from(kaiserSincFilter1d(0.25, 0.3, 12), (t, i) => Math.fround(t) + (i % 3 === 0 ? 3e-7 : 0));
  const up = createUpSample1d(e, 2, 12, taps);
  const down = createDownSample1d(e, 2, 12, taps);
  assert.deepEqual(Array.from(up.taps), Array.from(taps));
  const x = randomHost(rng, [1, 17, 3], 'f32');
  const gx = e.upload(x.data, x.shape, 'f32');
  const u = upSample1d(e, gx, up);
  const d = downSample1d(e, gx, down);
  assertClose(await e.read(u), upSample1dRef(x, 2, taps), 'f32', 'upSample1d with given taps');
  assertClose(await e.read(d), downSample1dRef(x, 2, taps), 'f32', 'downSample1d with given taps');
  assert.throws(() => createUpSample1d(e, 2, 12, taps.subarray(0, 11)), /UpSample1d: 11 taps given for kernelSize 12/);
  for (const t of [gx, u, d]) t.free();
  up.free();
  down.free();
}));
