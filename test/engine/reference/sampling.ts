// CPU reference for shaders/sampling.wgsl: float64 penalty, top-k (lowest index first on ties), temperature
// softmax over the top k, and the draw from a given uniform u (the shader's PCG key is re-implemented here
// independently, so a change on either side shows up).
import type { HostTensor } from '../helpers';

export interface SampleRefOptions {
  temperature?: number;
  topK?: number;
  repetitionPenalty?: number;
  /** Per row: the previous token ids. */
  prev?: number[][];
}

export interface SampleRefResult {
  tokens: number[];
  /** Per row: the smallest |u * total - cumulative_r| / total over the top k (how close the draw was to a
   * boundary, where f32 vs float64 rounding could pick the neighbour). Infinity for greedy rows. */
  margins: number[];
}

export function sampleRef(logits: HostTensor, uniforms: number[], o: SampleRefOptions = {}): SampleRefResult {
  const [B, V] = logits.shape as [number, number];
  const k = o.topK ?? 1;
  const T = o.temperature ?? 1;
  const pen = o.repetitionPenalty ?? 1;
  const tokens: number[] = [];
  const margins: number[] = [];
  for (let b = 0; b < B; b++) {
    const row = Array.from(logits.data.subarray(b * V, (b + 1) * V));
    for (const t of new Set(o.prev?.[b] ?? [])) {
      if (t >= 0 && t < V && pen !== 1) row[t] = row[t]! > 0 ? row[t]! / pen : row[t]! * pen;
    }
    const order = row.map((v, i) => [v, i] as const).sort((x, y) => y[0] - x[0] || x[1] - y[1]).slice(0, k);
    if (k === 1 || T === 0) {
      tokens.push(order[0]![1]);
      margins.push(Infinity);
      continue;
    }
    const w = order.map(([v]) => Math.exp((v - order[0]![0]) / T));
    const total = w.reduce((a, c) => a + c, 0);
    const goal = uniforms[b]! * total;
    let cum = 0;
    let token = order[k - 1]![1];
    let margin = Infinity;
    let chosen = false;
    for (let r = 0; r < k; r++) {
      cum += w[r]!;
      margin = Math.min(margin, Math.abs(goal - cum) / total);
      if (!chosen && goal < cum) {
        token = order[r]![1];
        chosen = true;
      }
    }
    tokens.push(token);
    margins.push(margin);
  }
  return { tokens, margins };
}

/** PCG hash (Jarzynski & Olano 2020) keyed by (seed, step, row): 24 bits -> [0, 1). */
export function uniformRef(seed: number, step: number, row: number): number {
  const hash = (x: bigint): bigint => {
    const state = (x * 747796405n + 2891336453n) & 0xffffffffn;
    const word = (((state >> ((state >> 28n) + 4n)) ^ state) * 277803737n) & 0xffffffffn;
    return (word >> 22n) ^ word;
  };
  const h = hash(hash(hash(BigInt(seed >>> 0)) ^ BigInt(step >>> 0)) ^ BigInt(row >>> 0));
  return Number(h >> 8n) / 16777216;
}
