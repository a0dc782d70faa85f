// Bit-level conversions used on upload (f16, bf16, f8 e4m3).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { bf16BitsToF32, f16BitsToF32, f32ToBf16Bits, f32ToF16Bits, f8e4m3ToF32 } from '../../src/engine/dtype';

test('every f16 bit pattern round-trips through f32', () => {
  for (let h = 0; h < 0x10000; h++) {
    const v = f16BitsToF32(h);
    if (Number.isNaN(v)) assert.ok(Number.isNaN(f16BitsToF32(f32ToF16Bits(v))));
    else assert.equal(f32ToF16Bits(v), h, `0x${h.toString(16)}`);
  }
});

test('f32 -> f16 rounds to nearest even, overflows to inf, keeps subnormals', () => {
  const cases: [number, number][] = [
    [65504, 65504],
    [65519, 65504],
    [65520, Infinity],
    [1 + 2 ** -11, 1], // tie -> even
    [1 + 3 * 2 ** -11, 1 + 2 ** -9], // tie -> even (up)
    [2 ** -24, 2 ** -24],
    [2 ** -25, 0], // tie -> even (zero)
    [3 * 2 ** -26, 2 ** -24],
    [-0.1, -0.0999755859375],
  ];
  for (const [x, want] of cases) assert.equal(f16BitsToF32(f32ToF16Bits(x)), want, String(x));
});

test('bf16 and f8 e4m3 decode', () => {
  assert.equal(bf16BitsToF32(0x3f80), 1);
  assert.equal(bf16BitsToF32(0xc049), -3.140625);
  assert.equal(f32ToBf16Bits(1 + 2 ** -8), 0x3f80); // tie -> even
  assert.equal(f32ToBf16Bits(1 + 3 * 2 ** -8), 0x3f82);
  assert.equal(f8e4m3ToF32(0x7e), 448);
  assert.ok(Number.isNaN(f8e4m3ToF32(0x7f)));
  assert.equal(f8e4m3ToF32(0x01), 2 ** -9);
  assert.equal(f8e4m3ToF32(0x08), 2 ** -6);
  assert.equal(f8e4m3ToF32(0xb8), -1);
});
