// Softmax over the last dim (max and sum of exp in f32). x any strided view; out contiguous, same shape, at any
// element offset (a view of a bigger tensor).
//   shader:    shaders/softmax.wgsl (entry softmax; override WG)
//   reference: test/engine/reference/reduce.ts (softmaxRef)
//   tests:     test/engine/softmax.test.ts
import type { Engine } from '../engine';
import { grid1d } from '../recorder';
import type { Tensor } from '../tensor';
import { rowOutput, rowParams } from './reduce';

const WG = 64;

export function softmax(e: Engine, x: Tensor, out?: Tensor): Tensor {
  const o = rowOutput(e, 'softmax', x, x.dtype, out, true);
  const rows = x.numel / x.shape[x.rank - 1]!;
  const kernel = e.kernels.get({ shader: 'softmax', entry: 'softmax', dtype: x.dtype, constants: { WG } });
  e.recorder.dispatch({ kernel, bindings: [o, x], params: rowParams(x, o), workgroups: grid1d(rows, 1) });
  return o;
}
