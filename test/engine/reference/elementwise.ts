// CPU reference for shaders/elementwise.wgsl: float64, logical row-major inputs, numpy broadcasting.
import { broadcastShapes, contiguousStrides, fmtShape, numelOf } from '../../../src/engine/tensor';
import type { ScalarOp } from '../../../src/engine/ops/elementwise';
import type { HostTensor } from '../helpers';

export function applyRef(op: ScalarOp, x: number, y: number): number {
  switch (op) {
    case 'add': return x + y;
    case 'sub': return x - y;
    case 'mul': return x * y;
    case 'div': return x / y;
    case 'rsub': return y - x;
    case 'rdiv': return y / x;
    case 'max': return Math.max(x, y);
    case 'min': return Math.min(x, y);
  }
}

/** out = a OP b (b a HostTensor, broadcast, or a number). */
export function binaryRef(op: ScalarOp, a: HostTensor, b: HostTensor | number): HostTensor {
  if (typeof b === 'number') return { data: a.data.map((x) => applyRef(op, x, b)), shape: [...a.shape] };
  const shape = broadcastShapes(a.shape, b.shape);
  if (!shape) throw new Error(`binaryRef: ${fmtShape(a.shape)} vs ${fmtShape(b.shape)}`);
  const out = new Float64Array(numelOf(shape));
  const ia = broadcastIndex(a.shape, shape);
  const ib = broadcastIndex(b.shape, shape);
  for (let i = 0; i < out.length; i++) out[i] = applyRef(op, a.data[ia(i)]!, b.data[ib(i)]!);
  return { data: out, shape };
}

/** Maps a flat index of `to` to the flat index of the broadcast source `from`. */
export function broadcastIndex(from: readonly number[], to: readonly number[]): (i: number) => number {
  const lead = to.length - from.length;
  const fs = contiguousStrides(from);
  const ts = contiguousStrides(to);
  return (i) => {
    let j = 0;
    for (let d = 0; d < from.length; d++) {
      if (from[d] === 1) continue;
      j += (Math.floor(i / ts[d + lead]!) % to[d + lead]!) * fs[d]!;
    }
    return j;
  };
}
