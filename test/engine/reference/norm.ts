// CPU reference for shaders/norm.wgsl: float64, logical row-major host arrays.
import { numelOf } from '../../../src/engine/tensor';
import type { HostTensor } from '../helpers';
import { broadcastIndex } from './elementwise';

export interface RowNormRef {
  rms: boolean;
  eps: number;
  weight?: HostTensor; // [D]
  bias?: HostTensor; // [D]
  scale?: HostTensor; // broadcasts to [...lead[:-1], S, D]
  shift?: HostTensor;
  gate?: HostTensor;
  residual?: HostTensor; // x's shape
  scaleOffset?: number;
  segments?: number[]; // lengths along the last leading dim
}

/** LayerNorm/RMSNorm over the last dim, then affine, modulation, gate and residual. */
export function rowNormRef(x: HostTensor, o: RowNormRef): HostTensor {
  const d = x.shape[x.shape.length - 1]!;
  const lead = x.shape.slice(0, -1);
  const rows = numelOf(lead);
  const L = lead.length ? lead[lead.length - 1]! : 1;
  const segs = o.segments ?? [L];
  const segOf = (l: number) => {
    let acc = 0;
    for (let s = 0; s < segs.length; s++) {
      acc += segs[s]!;
      if (l < acc) return s;
    }
    return segs.length - 1;
  };
  const modShape = lead.length ? [...lead.slice(0, -1), segs.length, d] : [d];
  const modIdx = (t: HostTensor | undefined) => (t ? broadcastIndex(t.shape, modShape) : null);
  const [isc, ish, ig] = [modIdx(o.scale), modIdx(o.shift), modIdx(o.gate)];
  const out = new Float64Array(x.data.length);
  for (let r = 0; r < rows; r++) {
    const row = x.data.subarray(r * d, (r + 1) * d);
    const mean = o.rms ? 0 : row.reduce((a, v) => a + v, 0) / d;
    const v = row.reduce((a, t) => a + (t - mean) ** 2, 0) / d;
    const rstd = 1 / Math.sqrt(v + o.eps);
    // flat index of this row's (lead[:-1], segment) in modShape, times D
    const l = r % L;
    const modRow = (Math.floor(r / L) * segs.length + segOf(l)) * d;
    for (let i = 0; i < d; i++) {
      let y = (row[i]! - mean) * rstd;
      if (o.weight) y *= o.weight.data[i]!;
      if (o.bias) y += o.bias.data[i]!;
      if (isc) y *= (o.scaleOffset ?? 1) + o.scale!.data[isc(modRow + i)]!;
      if (ish) y += o.shift!.data[ish(modRow + i)]!;
      if (ig) y *= o.gate!.data[ig(modRow + i)]!;
      if (o.residual) y += o.residual.data[r * d + i]!;
      out[r * d + i] = y;
    }
  }
  return { data: out, shape: [...x.shape] };
}

/** GroupNorm of channels-last x [B, ...spatial, C], then affine and SiLU. */
export function groupNormRef(x: HostTensor, groups: number, eps: number, weight?: HostTensor, bias?: HostTensor, silu = false): HostTensor {
  const c = x.shape[x.shape.length - 1]!;
  const b = x.shape[0]!;
  const sp = numelOf(x.shape.slice(1, -1));
  const cpg = c / groups;
  const out = new Float64Array(x.data.length);
  const at = (bi: number, s: number, ch: number) => (bi * sp + s) * c + ch;
  for (let bi = 0; bi < b; bi++) {
    for (let g = 0; g < groups; g++) {
      let sum = 0;
      for (let s = 0; s < sp; s++) for (let k = 0; k < cpg; k++) sum += x.data[at(bi, s, g * cpg + k)]!;
      const mean = sum / (sp * cpg);
      let q = 0;
      for (let s = 0; s < sp; s++) for (let k = 0; k < cpg; k++) q += (x.data[at(bi, s, g * cpg + k)]! - mean) ** 2;
      const rstd = 1 / Math.sqrt(q / (sp * cpg) + eps);
      for (let s = 0; s < sp; s++) {
        for (let k = 0; k < cpg; k++) {
          const ch = g * cpg + k;
          let y = (x.data[at(bi, s, ch)]! - mean) * rstd;
          if (weight) y *= weight.data[ch]!;
          if (bias) y += bias.data[ch]!;
          if (silu) y = y / (1 + Math.exp(-y));
          out[at(bi, s, ch)] = y;
        }
      }
    }
  }
  return { data: out, shape: [...x.shape] };
}
