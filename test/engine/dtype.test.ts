// Bit-level conversions used on upload (f16, bf16, f8 e4m3).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { bf16BitsToF32, bf16ToF16Table, F16_OVERFLOW, f16BitsToF32, f32ToBf16Bits, f32ToF16Bits, f8e4m3ToF32 } from '../../src/engine/dtype';

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

test('the f16 table holds every half by the IEEE formula', () => {
  for (let h = 0; h < 0x10000; h++) {
    const sign = h & 0x8000 ? -1 : 1;
    const exp = (h >> 10) & 0x1f;
    const mant = h & 0x3ff;
    const want = exp === 0 ? sign * mant * 2 ** -24 : exp === 0x1f ? (mant ? NaN : sign * Infinity) : sign * (1 + mant / 1024) * 2 ** (exp - 15);
    assert.ok(Object.is(f16BitsToF32(h), want) || (Number.isNaN(want) && Number.isNaN(f16BitsToF32(h))), `0x${h.toString(16)}`);
  }
});

test('bf16 -> f16 by table: exact inside f16 range, rounded below it, finite overflow marked, inf and NaN kept', () => {
  const t = bf16ToF16Table();
  for (let b = 0; b < 0x10000; b++) {
    const v = bf16BitsToF32(b);
    const h = t[b]!;
    if (Number.isFinite(v) && Math.abs(v) >= 65520) assert.equal(h & 0x7fff, F16_OVERFLOW, `0x${b.toString(16)} = ${v}`);
    else if (Number.isNaN(v)) assert.ok(Number.isNaN(f16BitsToF32(h)), `0x${b.toString(16)}`);
    else {
      assert.equal(h, f32ToF16Bits(v), `0x${b.toString(16)} = ${v}`);
      if (Math.abs(v) >= 2 ** -14 || v === 0) assert.equal(f16BitsToF32(h), v, `0x${b.toString(16)} exact`);
    }
  }
});
