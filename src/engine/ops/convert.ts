// Checkpoint elements converted on the GPU at load: BF16 -> f16, F32 -> f16, BF16 -> f32. The loader uploads a chunk
// of the file's bytes as they are (a staging tensor, one chunk wide) and this widens or narrows it into the
// destination tensor, so the conversion is not a JS loop on the main thread (load.ts; issue 44, "load at disk speed").
//   shader:    shaders/convert.wgsl (entries to_f16 with override SRC, bf16_to_f32; override WG)
//   reference: src/engine/dtype.ts f32ToF16Bits and bf16ToF16Table (the CPU path of load.ts readConverted): the
//              same bits, integer arithmetic on both sides
//   tests:     test/engine/convert.test.ts
import type { Engine } from '../engine';
import { Params } from '../kernels';
import { grid1d } from '../recorder';
import { outputTensor } from './checks';
import type { Tensor } from '../tensor';

const WG = 256;

/** The checkpoint dtypes the kernel reads, and to what. */
export type GpuConversion = 'BF16->f16' | 'F32->f16' | 'BF16->f32';

export const GPU_CONVERSIONS: readonly GpuConversion[] = ['BF16->f16', 'F32->f16', 'BF16->f32'];

/**
 * Writes `n` elements converted from the file bytes held at the start of `src` (a contiguous tensor at offset 0,
 * any dtype: its storage is read as u32 words) into the contiguous `out` from element `outOffset`. To f16 the offset
 * must be even (a thread writes one 32-bit word, two halves; the loader's chunks are whole multiples of 4 elements);
 * a finite value beyond f16's range is written as ±inf and its bits recorded in `status` (overflowStatus).
 */
export function convertInto(e: Engine, conv: GpuConversion, src: Tensor, n: number, out: Tensor, outOffset: number, status?: Tensor): void {
  const op = `convert ${conv}`;
  const toF16 = conv !== 'BF16->f32';
  const srcBytes = conv === 'F32->f16' ? 4 : 2;
  if (!src.isContiguous || src.offset !== 0) throw new RangeError(`${op}: src ${src} must be a whole contiguous tensor`);
  if (n * srcBytes > src.storage.byteLength) throw new RangeError(`${op}: ${n} elements (${n * srcBytes} bytes) overrun src ${src}`);
  // out is written from element outOffset of the view (the offset honoured): its dtype, layout and aliasing checked as
  // every op's are; the range is this op's own check below
  outputTensor(e, op, out.shape, toF16 ? 'f16' : 'f32', out, [src, status], true);
  const at = out.offset + outOffset;
  if (outOffset < 0 || outOffset + n > out.numel) throw new RangeError(`${op}: ${n} values at ${outOffset} overrun ${out}`);
  if (toF16 && at % 2 !== 0) throw new RangeError(`${op}: out element offset ${at} must be even (one word, two halves, per thread)`);
  if (toF16 && (!status || status.storage.byteLength < 16)) throw new RangeError(`${op}: needs a 16-byte status tensor (overflowStatus)`);
  if (n === 0) return;
  const entry = toF16 ? 'to_f16' : 'bf16_to_f32';
  const kernel = e.kernels.get({ shader: 'convert', entry, dtype: 'f32', constants: { ...(toF16 ? { SRC: conv === 'F32->f16' ? 1 : 0 } : {}), WG } });
  const params = new Params().u32(n).u32(at).u32(0).u32(0);
  const bindings = toF16 ? [out, src, status!] : [out, src];
  e.recorder.dispatch({ kernel, bindings, params, workgroups: grid1d(Math.ceil(n / 2), WG), flops: n });
}

/** A zeroed status tensor for convertInto to f16 (four u32 words). */
export function overflowStatus(e: Engine, label = 'convert status'): Tensor {
  const t = e.empty([4], 'f32', label);
  e.writeBytes(t, 0, new Uint8Array(16));
  return t;
}

/**
 * The value beyond f16's range that convertInto recorded in `status` (a positive one first), or null if none. Waits
 * for the GPU (a readback): once per tensor, at its end.
 */
export async function overflowedValue(e: Engine, status: Tensor): Promise<number | null> {
  // status holds f32 bits: the magnitude of the largest positive and of the largest negative value that overflowed
  const [pos, neg] = await e.read(status);
  if (pos) return pos;
  if (neg) return -neg!;
  return null;
}
