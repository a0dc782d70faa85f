// CPU reference for shaders/attention.wgsl: float64 scores, a plain (two-pass) softmax per query row, the
// same mask rules (sliding window: query i sees keys j > i + queryOffset - window). A query that sees no key gets 0.
import type { AttentionMask } from '../../../src/engine/ops/attention';
import type { HostTensor } from '../helpers';

export interface AttentionRefOptions {
  scale?: number;
  mask?: AttentionMask;
  queryOffset?: number;
  blockIds?: ArrayLike<number>;
  kvLen?: number;
  window?: number;
}

/** q (B, Hq, Lq, D), k and v (B, Hkv, Lk, D) -> (B, Hq, Lq, D). */
export function attentionRef(q: HostTensor, k: HostTensor, v: HostTensor, o: AttentionRefOptions = {}): HostTensor {
  const [B, Hq, Lq, D] = q.shape as [number, number, number, number];
  const [, Hkv, Lk] = k.shape as [number, number, number, number];
  const scale = o.scale ?? 1 / Math.sqrt(D);
  const mask = o.mask ?? 'none';
  const qoff = o.queryOffset ?? 0;
  const kvLen = o.kvLen ?? Lk;
  const out = new Float64Array(B * Hq * Lq * D);
  const s = new Float64Array(Lk);
  const seen = (i: number, j: number): boolean => {
    if (j >= kvLen) return false;
    if (o.window !== undefined && j <= i + qoff - o.window) return false;
    if (mask === 'causal') return j <= i + qoff;
    if (mask === 'block_causal') return o.blockIds![j]! <= o.blockIds![i + qoff]!;
    return true;
  };
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < Hq; h++) {
      const hk = Math.floor(h / (Hq / Hkv));
      const kb = (b * Hkv + hk) * Lk * D;
      for (let i = 0; i < Lq; i++) {
        const qb = ((b * Hq + h) * Lq + i) * D;
        let max = -Infinity;
        for (let j = 0; j < Lk; j++) {
          if (!seen(i, j)) continue;
          let dot = 0;
          for (let d = 0; d < D; d++) dot += q.data[qb + d]! * k.data[kb + j * D + d]!;
          s[j] = dot * scale;
          max = Math.max(max, s[j]!);
        }
        if (max === -Infinity) continue; // no visible key: zeros
        let sum = 0;
        for (let j = 0; j < Lk; j++) if (seen(i, j)) sum += Math.exp(s[j]! - max);
        for (let j = 0; j < Lk; j++) {
          if (!seen(i, j)) continue;
          const p = Math.exp(s[j]! - max) / sum;
          for (let d = 0; d < D; d++) out[qb + d] += p * v.data[kb + j * D + d]!;
        }
      }
    }
  }
  return { data: out, shape: [B, Hq, Lq, D] };
}
