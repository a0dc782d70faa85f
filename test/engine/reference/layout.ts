// CPU reference for shaders/layout.wgsl: logical row-major host arrays.
import { contiguousStrides, numelOf } from '../../../src/engine/tensor';
import type { HostTensor } from '../helpers';

/** Permutation of a host tensor: out.shape[i] = x.shape[order[i]]. */
export function permuteRef(x: HostTensor, order: number[]): HostTensor {
  const shape = order.map((d) => x.shape[d]!);
  const xs = contiguousStrides(x.shape);
  const os = contiguousStrides(shape);
  const out = new Float64Array(x.data.length);
  for (let i = 0; i < out.length; i++) {
    let j = 0;
    for (let k = 0; k < shape.length; k++) j += (Math.floor(i / os[k]!) % shape[k]!) * xs[order[k]!]!;
    out[i] = x.data[j]!;
  }
  return { data: out, shape };
}

export function concatRef(xs: HostTensor[], dim: number): HostTensor {
  const shape = [...xs[0]!.shape];
  shape[dim] = xs.reduce((a, t) => a + t.shape[dim]!, 0);
  const outer = numelOf(shape.slice(0, dim));
  const inner = numelOf(shape.slice(dim + 1));
  const out: number[] = [];
  for (let o = 0; o < outer; o++) for (const t of xs) for (let k = 0; k < t.shape[dim]! * inner; k++) out.push(t.data[o * t.shape[dim]! * inner + k]!);
  return { data: Float64Array.from(out), shape };
}

export function padRef(x: HostTensor, before: number[], after: number[], mode: 'constant' | 'replicate' | 'reflect', value: number): HostTensor {
  const shape = x.shape.map((n, d) => n + before[d]! + after[d]!);
  const os = contiguousStrides(shape);
  const xs = contiguousStrides(x.shape);
  const out = new Float64Array(numelOf(shape));
  for (let i = 0; i < out.length; i++) {
    let j = 0;
    let inside = true;
    for (let d = 0; d < shape.length; d++) {
      const n = x.shape[d]!;
      let c = (Math.floor(i / os[d]!) % shape[d]!) - before[d]!;
      if (c < 0 || c >= n) {
        if (mode === 'constant') inside = false;
        else if (mode === 'replicate') c = Math.min(Math.max(c, 0), n - 1);
        else c = c < 0 ? -c : 2 * (n - 1) - c;
      }
      j += c * xs[d]!;
    }
    out[i] = inside ? x.data[j]! : value;
  }
  return { data: out, shape };
}

export function gatherRef(table: HostTensor, ids: number[], idShape: number[]): HostTensor {
  const [v, d] = table.shape as [number, number];
  const out = new Float64Array(ids.length * d);
  ids.forEach((id, n) => {
    for (let k = 0; k < d; k++) out[n * d + k] = id >= 0 && id < v ? table.data[id * d + k]! : NaN;
  });
  return { data: out, shape: [...idShape, d] };
}
