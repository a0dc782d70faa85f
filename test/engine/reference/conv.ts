// CPU reference for shaders/conv.wgsl: float64, logical row-major host arrays.
//   x channels-last [N, ...spatial, C]; w as PyTorch stores it: [Cout, Cin/groups, k...] (plain) or
//   [Cin, Cout/groups, k...] (transposed); out channels-last [N, ...outSpatial, Cout].
// Plain conv: the input is first padded explicitly (zeros or edge copies per axis), then a valid convolution runs.
// Transposed conv: every input element scatters x * w into the full output, which is then cropped; a different
// formulation from the kernel's gather on purpose.
import type { HostTensor } from '../helpers';

export interface ConvRefOptions {
  stride: number[];
  /** [front, back] per spatial axis. */
  padding: [number, number][];
  dilation: number[];
  groups: number;
  bias?: HostTensor;
  /** Per spatial axis (default zeros). */
  padMode?: ('zeros' | 'replicate')[];
  /** Time axis padded dilation*(k-1) in front, 0 behind (overrides padding[0]). */
  causal?: boolean;
}

export interface ConvTransposeRefOptions {
  stride: number[];
  padding: [number, number][];
  outputPadding: number[];
  dilation: number[];
  groups: number;
  bias?: HostTensor;
}

const prod = (v: readonly number[]) => v.reduce((a, b) => a * b, 1);

/** Multi-index of flat i in shape (row-major). */
function unflatten(i: number, shape: readonly number[]): number[] {
  const idx = new Array<number>(shape.length);
  for (let d = shape.length - 1; d >= 0; d--) {
    idx[d] = i % shape[d]!;
    i = Math.floor(i / shape[d]!);
  }
  return idx;
}

function flatten(idx: readonly number[], shape: readonly number[]): number {
  let f = 0;
  for (let d = 0; d < shape.length; d++) f = f * shape[d]! + idx[d]!;
  return f;
}

/** x padded per axis: zeros or replicated edges. Returns [N, ...padded, C]. */
export function padChannelsLast(x: HostTensor, pads: [number, number][], modes: ('zeros' | 'replicate')[]): HostTensor {
  const d = x.shape.length - 2;
  const sp = x.shape.slice(1, 1 + d);
  const psp = sp.map((n, i) => n + pads[i]![0] + pads[i]![1]);
  const [N, C] = [x.shape[0]!, x.shape[d + 1]!];
  const shape = [N, ...psp, C];
  const data = new Float64Array(prod(shape));
  for (let n = 0; n < N; n++) {
    for (let q = 0; q < prod(psp); q++) {
      const pi = unflatten(q, psp);
      let inside = true;
      const si = pi.map((p, a) => {
        let s = p - pads[a]![0];
        if (s < 0 || s >= sp[a]!) {
          if (modes[a] === 'replicate') s = Math.min(Math.max(s, 0), sp[a]! - 1);
          else inside = false;
        }
        return s;
      });
      if (!inside) continue;
      const src = (n * prod(sp) + flatten(si, sp)) * C;
      const dst = (n * prod(psp) + q) * C;
      for (let c = 0; c < C; c++) data[dst + c] = x.data[src + c]!;
    }
  }
  return { data, shape };
}

export function convRef(x: HostTensor, w: HostTensor, o: ConvRefOptions): HostTensor {
  const d = x.shape.length - 2;
  const k = w.shape.slice(2);
  const pads = o.padding.map((p) => [p[0], p[1]] as [number, number]);
  if (o.causal) pads[0] = [o.dilation[0]! * (k[0]! - 1), 0];
  const xp = padChannelsLast(x, pads, o.padMode ?? Array(d).fill('zeros'));
  const psp = xp.shape.slice(1, 1 + d);
  const [N, Cin] = [x.shape[0]!, x.shape[d + 1]!];
  const Cout = w.shape[0]!;
  const cinG = Cin / o.groups;
  const coutG = Cout / o.groups;
  const osp = psp.map((n, i) => Math.floor((n - o.dilation[i]! * (k[i]! - 1) - 1) / o.stride[i]!) + 1);
  const out = new Float64Array(N * prod(osp) * Cout);
  for (let n = 0; n < N; n++) {
    for (let q = 0; q < prod(osp); q++) {
      const oi = unflatten(q, osp);
      for (let co = 0; co < Cout; co++) {
        const g = Math.floor(co / coutG);
        let s = o.bias ? o.bias.data[co]! : 0;
        for (let t = 0; t < prod(k); t++) {
          const ki = unflatten(t, k);
          const pos = oi.map((v, a) => v * o.stride[a]! + ki[a]! * o.dilation[a]!);
          const xb = (n * prod(psp) + flatten(pos, psp)) * Cin + g * cinG;
          for (let ci = 0; ci < cinG; ci++) s += xp.data[xb + ci]! * w.data[(co * cinG + ci) * prod(k) + t]!;
        }
        out[(n * prod(osp) + q) * Cout + co] = s;
      }
    }
  }
  return { data: out, shape: [N, ...osp, Cout] };
}

export function convTransposeRef(x: HostTensor, w: HostTensor, o: ConvTransposeRefOptions): HostTensor {
  const d = x.shape.length - 2;
  const k = w.shape.slice(2);
  const sp = x.shape.slice(1, 1 + d);
  const [N, Cin] = [x.shape[0]!, x.shape[d + 1]!];
  const coutG = w.shape[1]!;
  const Cout = coutG * o.groups;
  const cinG = Cin / o.groups;
  // Full (uncropped) output, plus output padding at the back; then crop padding front/back.
  const full = sp.map((n, i) => (n - 1) * o.stride[i]! + o.dilation[i]! * (k[i]! - 1) + 1 + o.outputPadding[i]!);
  const acc = new Float64Array(N * prod(full) * Cout);
  for (let n = 0; n < N; n++) {
    for (let q = 0; q < prod(sp); q++) {
      const ii = unflatten(q, sp);
      for (let ci = 0; ci < Cin; ci++) {
        const g = Math.floor(ci / cinG);
        const xv = x.data[(n * prod(sp) + q) * Cin + ci]!;
        for (let t = 0; t < prod(k); t++) {
          const ki = unflatten(t, k);
          const pos = ii.map((v, a) => v * o.stride[a]! + ki[a]! * o.dilation[a]!);
          const ob = (n * prod(full) + flatten(pos, full)) * Cout + g * coutG;
          for (let co = 0; co < coutG; co++) acc[ob + co] += xv * w.data[(ci * coutG + co) * prod(k) + t]!;
        }
      }
    }
  }
  const osp = full.map((n, i) => n - o.padding[i]![0] - o.padding[i]![1]);
  const out = new Float64Array(N * prod(osp) * Cout);
  for (let n = 0; n < N; n++) {
    for (let q = 0; q < prod(osp); q++) {
      const pos = unflatten(q, osp).map((v, a) => v + o.padding[a]![0]);
      const src = (n * prod(full) + flatten(pos, full)) * Cout;
      for (let co = 0; co < Cout; co++) out[(n * prod(osp) + q) * Cout + co] = acc[src + co]! + (o.bias ? o.bias.data[co]! : 0);
    }
  }
  return { data: out, shape: [N, ...osp, Cout] };
}
