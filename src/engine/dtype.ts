// Element types and the bit-level conversions used on upload and readback (Node 20 has no Float16Array).
//   GPU tensor dtypes: f32, f16 (activations and weights), i8 (weights only, with per-channel scales in a
//   separate f32/f16 tensor; packed 4 per u32 in shaders). bf16 and f8 exist only in checkpoints and are
//   converted on upload.

export type DType = 'f32' | 'f16' | 'i8';

export const DTYPE_BYTES: Readonly<Record<DType, number>> = { f32: 4, f16: 2, i8: 1 };

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** float32 -> IEEE half bits, round to nearest even; overflow -> inf, NaN stays NaN. */
export function f32ToF16Bits(value: number): number {
  f32[0] = value;
  const x = u32[0]!;
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  let mant = x & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0); // inf / NaN
  let e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00; // overflow
  if (e <= 0) {
    // subnormal half (or zero): shift the implicit 1 in, round to nearest even
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    const half = 1 << (shift - 1);
    let m = mant >>> shift;
    const rest = mant & ((1 << shift) - 1);
    if (rest > half || (rest === half && m & 1)) m++;
    return sign | m;
  }
  let m = mant >>> 13;
  const rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest === 0x1000 && m & 1)) {
    m++;
    if (m === 0x400) {
      m = 0;
      e++;
      if (e >= 0x1f) return sign | 0x7c00;
    }
  }
  return sign | (e << 10) | m;
}

/** IEEE half bits -> number, computed (builds the table below). */
function f16BitsToF32Slow(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >>> 10) & 0x1f;
  const mant = h & 0x3ff;
  if (exp === 0) return sign * mant * 2 ** -24;
  if (exp === 0x1f) return mant ? NaN : sign * Infinity;
  return sign * (1 + mant / 1024) * 2 ** (exp - 15);
}

let halfTable: Float32Array | null = null;

/**
 * Every half's value, indexed by its 16 bits (256 KiB, built on first use). Loading converts billions of halves;
 * a table read is ~10x faster than computing each (profiled: 37 of 54 s of a DiT block's load went to the
 * computed form).
 */
export function f16Table(): Float32Array {
  if (!halfTable) {
    halfTable = new Float32Array(65536);
    for (let h = 0; h < 65536; h++) halfTable[h] = f16BitsToF32Slow(h);
  }
  return halfTable;
}

/** IEEE half bits -> number. */
export function f16BitsToF32(h: number): number {
  return f16Table()[h & 0xffff]!;
}

let bf16HalfTable: Uint16Array | null = null;

/**
 * bf16 bits -> f16 bits, indexed by the bf16 bits (128 KiB, built on first use). bf16 carries 7 mantissa bits and
 * f16 10, so every bf16 inside f16's normal range converts exactly; below it the half rounds to nearest even, and
 * a finite bf16 beyond f16's range maps to F16_OVERFLOW (0x7c01 | sign, a NaN pattern no conversion produces) so
 * the caller can refuse it by name.
 */
export function bf16ToF16Table(): Uint16Array {
  if (!bf16HalfTable) {
    bf16HalfTable = new Uint16Array(65536);
    for (let b = 0; b < 65536; b++) {
      const h = f32ToF16Bits(bf16BitsToF32(b));
      const finite = (b & 0x7f80) !== 0x7f80;
      bf16HalfTable[b] = finite && (h & 0x7fff) === 0x7c00 ? (h & 0x8000) | F16_OVERFLOW : h;
    }
  }
  return bf16HalfTable;
}

/** bf16ToF16Table's mark for a finite value beyond f16's range (sign bit aside). */
export const F16_OVERFLOW = 0x7c01;

/** True where typed-array views read the same numbers as a little-endian file (x86, Arm: every host we run on). */
export const LITTLE_ENDIAN_HOST = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/** bfloat16 bits -> number (bf16 is the top half of a float32). */
export function bf16BitsToF32(b: number): number {
  u32[0] = (b & 0xffff) << 16;
  return f32[0]!;
}

/** float32 -> bf16 bits, round to nearest even (used by the checkpoint writer). */
export function f32ToBf16Bits(value: number): number {
  f32[0] = value;
  const x = u32[0]!;
  if ((x & 0x7f800000) === 0x7f800000 && x & 0x7fffff) return (x >>> 16) | 0x40; // NaN
  return ((x + 0x7fff + ((x >>> 16) & 1)) >>> 16) & 0xffff;
}

/** float8 e4m3fn (bias 7, no infinities, S.1111.111 is NaN) -> number. */
export function f8e4m3ToF32(b: number): number {
  const sign = b & 0x80 ? -1 : 1;
  const exp = (b >>> 3) & 0xf;
  const mant = b & 0x7;
  if (exp === 0xf && mant === 0x7) return NaN;
  if (exp === 0) return sign * mant * 2 ** -9;
  return sign * (1 + mant / 8) * 2 ** (exp - 7);
}

/** Rounds every value to what the dtype can hold (tests build references from the rounded inputs). */
export function roundToDType(values: ArrayLike<number>, dtype: DType): Float64Array {
  const out = new Float64Array(values.length);
  for (let i = 0; i < values.length; i++) {
    const v = values[i]!;
    out[i] = dtype === 'f16' ? f16BitsToF32(f32ToF16Bits(v)) : dtype === 'i8' ? Math.max(-128, Math.min(127, Math.round(v))) : Math.fround(v);
  }
  return out;
}

/** Host values -> the bytes a GPU tensor of `dtype` holds. */
export function encode(values: ArrayLike<number>, dtype: DType): Uint8Array {
  if (dtype === 'f32') return new Uint8Array(Float32Array.from(values).buffer);
  if (dtype === 'i8') return new Uint8Array(Int8Array.from(values).buffer);
  const h = new Uint16Array(values.length);
  for (let i = 0; i < values.length; i++) h[i] = f32ToF16Bits(values[i]!);
  return new Uint8Array(h.buffer);
}

/** The bytes of a GPU tensor -> float32 values. `bytes` must start on an element boundary. */
export function decode(bytes: Uint8Array, dtype: DType, count: number): Float32Array {
  if (dtype === 'f32') return new Float32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + count * 4));
  if (dtype === 'i8') return Float32Array.from(new Int8Array(bytes.buffer, bytes.byteOffset, count));
  const h = new Uint16Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + count * 2));
  const out = new Float32Array(count);
  for (let i = 0; i < count; i++) out[i] = f16BitsToF32(h[i]!);
  return out;
}
