// Input and output checks shared by the op families; messages name the op and the shapes.
import type { DType } from '../dtype';
import type { Engine } from '../engine';
import { fmtShape, Tensor } from '../tensor';

export function checkFloat(op: string, t: Tensor): void {
  if (t.dtype !== 'f32' && t.dtype !== 'f16') throw new TypeError(`${op}: ${t}: only f32 and f16 tensors`);
}

/** checkFloat plus a rank limit (the shader's shape/stride slots). */
export function checkFloatRank(op: string, t: Tensor, maxRank: number): void {
  checkFloat(op, t);
  if (t.rank > maxRank) throw new RangeError(`${op}: rank ${t.rank} ${fmtShape(t.shape)} > ${maxRank}`);
}

export function sameShape(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((n, i) => n === b[i]);
}

/**
 * The op's output: a new tensor, or the caller's `out`, which must be contiguous, of the right dtype and shape, and
 * share no storage with an input. Every op with an `out` option checks it here, so none can ignore a view's offset:
 * `honoursOffset` says the op's kernel adds out.offset to every write (a params slot carries it, see docs/engine.md);
 * without it an out view that starts past element 0 of its storage (e.g. a slice of a bigger tensor) is refused,
 * because the kernel would write from element 0 and corrupt whatever lives there.
 */
export function outputTensor(
  e: Engine, op: string, shape: readonly number[], dtype: DType, out: Tensor | undefined,
  inputs: readonly (Tensor | undefined)[], honoursOffset = false,
): Tensor {
  if (!out) return e.empty(shape, dtype);
  const where = honoursOffset ? '' : ' at offset 0';
  if (out.dtype !== dtype || !out.isContiguous || !sameShape(out.shape, shape)) {
    throw new RangeError(`${op}: out ${out} must be a contiguous ${dtype}${fmtShape(shape)}${where}`);
  }
  if (!honoursOffset && out.offset !== 0) {
    throw new RangeError(
      `${op}: out ${out} is a view at element offset ${out.offset}, but ${op} writes from element 0 of the storage: ` +
        `out must be a contiguous ${dtype}${fmtShape(shape)} at offset 0 (write a new tensor, then copyInto the view)`,
    );
  }
  if (inputs.some((t) => t && t.storage === out.storage)) throw new RangeError(`${op}: out ${out} aliases an input`);
  return out;
}
