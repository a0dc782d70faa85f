// GGUF dequantisation on the GPU: whole blocks of a ggml quantised type (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K,
// Q6_K; layouts in src/engine/gguf.ts) -> f32 or f16 values, so a GGUF checkpoint's blocks cross to the GPU as stored
// (a quarter to a half of f16's bytes) and widen there (load.ts, at load).
//   shader:    shaders/dequant.wgsl (entry dequant; overrides TYPE, WG)
//   reference: src/engine/gguf.ts dequantize (ggml's dequantize_row_*), itself checked against gguf-py's
//   tests:     test/engine/dequant.test.ts
import type { Engine } from '../engine';
import { GGML_TYPES, type GgmlQuant } from '../gguf';
import { Params } from '../kernels';
import { outputTensor } from './checks';
import { grid1d } from '../recorder';
import type { Tensor } from '../tensor';

const WG = 256;

/**
 * Writes the values of the `bytes` block bytes held at the start of `blocks` (an i8 tensor of at least that many
 * bytes, rounded up to a whole word) into the contiguous `out` from element `outOffset`.
 */
export function dequantInto(e: Engine, type: GgmlQuant, blocks: Tensor, bytes: number, out: Tensor, outOffset = 0): void {
  const { id, block, bytes: bs } = GGML_TYPES[type];
  if (blocks.dtype !== 'i8' || !blocks.isContiguous || blocks.offset !== 0) throw new RangeError(`dequant ${type}: blocks ${blocks} must be a whole contiguous i8 tensor`);
  if (bytes % bs !== 0 || bytes > blocks.numel) throw new RangeError(`dequant ${type}: ${bytes} bytes are not whole ${bs}-byte blocks within ${blocks}`);
  if (out.dtype === 'i8') throw new RangeError(`dequant ${type}: out ${out} must be f32 or f16`);
  // contiguous and not sharing the blocks' storage; any offset (the kernel adds out.offset to every write)
  outputTensor(e, `dequant ${type}`, out.shape, out.dtype, out, [blocks], true);
  const n = (bytes / bs) * block;
  if (outOffset < 0 || outOffset + n > out.numel) throw new RangeError(`dequant ${type}: ${n} values at ${outOffset} overrun ${out}`);
  if (n === 0) return;
  const kernel = e.kernels.get({ shader: 'dequant', entry: 'dequant', dtype: out.dtype, constants: { TYPE: id, WG } });
  const params = new Params().u32(n).u32(out.offset + outOffset).u32(0).u32(0);
  e.recorder.dispatch({ kernel, bindings: [out, blocks], params, workgroups: grid1d(n, WG) });
}

/** `bytes` padded with zeros to a whole number of 4-byte words (writeBytes writes words), or as they are. */
export function wholeWords(bytes: Uint8Array): Uint8Array {
  if (bytes.byteLength % 4 === 0) return bytes;
  const padded = new Uint8Array(Math.ceil(bytes.byteLength / 4) * 4);
  padded.set(bytes);
  return padded;
}

/** The values of a whole quantised tensor's block bytes, as a new tensor of `shape` in `dtype`. */
export function dequantize(e: Engine, type: GgmlQuant, raw: Uint8Array, shape: readonly number[], dtype: 'f32' | 'f16' = 'f32'): Tensor {
  const words = Math.ceil(raw.byteLength / 4) * 4;
  const blocks = e.empty([Math.max(4, words)], 'i8', `gguf ${type} blocks`);
  try {
    if (raw.byteLength) e.writeBytes(blocks, 0, wholeWords(raw));
    const out = e.empty(shape, dtype);
    dequantInto(e, type, blocks, raw.byteLength, out);
    return out;
  } finally {
    blocks.free();
  }
}
