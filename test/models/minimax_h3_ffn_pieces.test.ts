// The H3 FFN in row pieces (blocks.ts H3FeedForward.forward, pieceRows): at 768p 10 s its [rows, 2F] intermediate is
// 4.2 GB in f16, so it runs in pieces written into their rows of the output. Rows are independent, so pieces must give
// the same bits as one piece, with the per-row gate and residual cut along and a broadcast gate left whole.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { uploadInt8, quantizeInt8PerChannel } from '../../src/engine/quantize';
import { H3FeedForward } from '../../src/models/minimax_h3/transformer/blocks';
import { randomHost, seeded, testEngine } from '../engine/helpers';

const L = 37;
const H = 12;
const F = 20;

for (const [dtype, int8] of [['f32', false], ['f16', false], ['f16', true]] as ['f32' | 'f16', boolean][]) {
  test(`FFN in pieces of 5 rows equals one piece (${dtype}${int8 ? ' int8' : ''}), per-row and broadcast gates`, seeded(async (rng) => {
    const e = await testEngine();
    const w0 = randomHost(rng, [2 * F, H], 'f32');
    const w2 = randomHost(rng, [H, F], 'f32');
    const weight = (w: { data: Float64Array; shape: number[] }) =>
      int8 ? uploadInt8(e, quantizeInt8PerChannel(w.data, w.shape[0]!, w.shape[1]!), dtype) : e.upload(w.data, w.shape, dtype);
    const ff = new H3FeedForward({ 0: { proj: weight(w0) }, 2: weight(w2) });
    const x = e.upload(randomHost(rng, [1, L, H], dtype).data, [1, L, H], dtype);
    const residual = e.upload(randomHost(rng, [1, L, H], dtype).data, [1, L, H], dtype);
    const rowGate = e.upload(randomHost(rng, [L, H], dtype).data, [L, H], dtype);
    const oneGate = e.upload(randomHost(rng, [1, 1, H], dtype).data, [1, 1, H], dtype);
    try {
      for (const gate of [rowGate, oneGate]) {
        const whole = ff.forward(e, x, { gate, residual }, L);
        const pieces = ff.forward(e, x, { gate, residual }, 5);
        assert.deepEqual(pieces.shape, [1, L, H]);
        const [a, b] = [await e.read(whole), await e.read(pieces)];
        assert.ok(a.every(Number.isFinite), 'finite');
        assert.deepEqual(Array.from(b), Array.from(a), `gate ${gate.shape.join('x')}`);
        whole.free();
        pieces.free();
      }
    } finally {
      for (const t of [x, residual, rowGate, oneGate]) t.free();
      ff.free();
    }
  }));
}
