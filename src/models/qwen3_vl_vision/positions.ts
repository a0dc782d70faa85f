// Position data of Qwen3-VL images, computed on the CPU (float32 where torch computes in float32):
//   - the tower's 2D rotary table (transformers vision_utils.get_vision_position_ids + Qwen3VLVisionRotaryEmbedding):
//     each patch has (row, col) on the patch grid, patches in merge-block order; inv_freq = 1 / 10000^(2k / (D/2))
//     for k < D/4 (D = head dim); pair j of the rotate-half RoPE (dims j, j + D/2) turns by row * inv[j] for
//     j < D/4 and col * inv[j - D/4] above
//   - the learned position table resampled to the grid (get_vision_bilinear_indices_and_weights): the side x side
//     table is read at linspace(0, side - 1, H) x linspace(0, side - 1, W) with bilinear weights, patches in
//     merge-block order
//   - the LLM's 3D MRoPE positions (Qwen3VLModel.get_rope_index): text tokens advance one counter on all three
//     axes; an image's (H/2) x (W/2) tokens sit at t = start, h = start + row, w = start + col (row-major), then
//     the counter moves on by max(H/2, W/2)
import type { RopeTable } from '../../engine/rope-tables';

const f = Math.fround;

/** (row, col) of each patch in merge-block order. */
export function patchRowCol(grid: readonly [number, number, number], merge: number): { row: Int32Array; col: Int32Array } {
  const [t, h, w] = grid;
  const n = t * h * w;
  const row = new Int32Array(n);
  const col = new Int32Array(n);
  let i = 0;
  for (let f0 = 0; f0 < t; f0++) {
    for (let bh = 0; bh < h / merge; bh++) {
      for (let bw = 0; bw < w / merge; bw++) {
        for (let mh = 0; mh < merge; mh++) {
          for (let mw = 0; mw < merge; mw++) {
            row[i] = bh * merge + mh;
            col[i] = bw * merge + mw;
            i++;
          }
        }
      }
    }
  }
  return { row, col };
}

/** The tower's rotary table for one image: cos/sin [patches, D/2] (the whole head rotated, rotate-half pairs). */
export function visionRotaryTable(grid: readonly [number, number, number], merge: number, headDim: number, theta = 10000): RopeTable {
  const dim = headDim / 2; // Qwen3VLVisionRotaryEmbedding(head_dim // 2)
  const quarter = dim / 2;
  // torch: 1 / theta ** (arange(0, dim, 2, float32) / dim), all in float32
  const inv = Array.from({ length: quarter }, (_, k) => f(1 / f(theta ** f((2 * k) / dim))));
  const { row, col } = patchRowCol(grid, merge);
  const n = row.length;
  const cos = new Float32Array(n * dim);
  const sin = new Float32Array(n * dim);
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < dim; j++) {
      const a = f((j < quarter ? row[i]! : col[i]!) * inv[j % quarter]!);
      cos[i * dim + j] = Math.cos(a);
      sin[i * dim + j] = Math.sin(a);
    }
  }
  return { length: n, pairs: dim, cos, sin };
}

/** torch.linspace(start, end, steps) in float32 (ATen's CPU kernel: from both ends towards the middle). */
function linspaceF32(start: number, end: number, steps: number): Float32Array {
  const out = new Float32Array(steps);
  if (steps === 1) {
    out[0] = start;
    return out;
  }
  const step = f((end - start) / (steps - 1));
  const half = Math.floor(steps / 2);
  for (let i = 0; i < steps; i++) out[i] = i < half ? f(start + f(step * i)) : f(end - f(step * (steps - i - 1)));
  return out;
}

/** Bilinear corners of the learned position table for one image, patches in merge-block order. */
export interface PositionCorners {
  /** (4, patches) table rows: [floor/floor, floor/ceil, ceil/floor, ceil/ceil] (h/w). */
  index: Int32Array;
  /** (4, patches) float32 weights. */
  weight: Float32Array;
}

export function positionCorners(grid: readonly [number, number, number], merge: number, numPositions: number): PositionCorners {
  const side = Math.round(Math.sqrt(numPositions));
  const [t, h, w] = grid;
  const hg = linspaceF32(0, side - 1, h);
  const wg = linspaceF32(0, side - 1, w);
  const { row, col } = patchRowCol([t, h, w], merge);
  const n = row.length;
  const index = new Int32Array(4 * n);
  const weight = new Float32Array(4 * n);
  for (let i = 0; i < n; i++) {
    const y = hg[row[i]!]!;
    const x = wg[col[i]!]!;
    const y0 = Math.trunc(y);
    const x0 = Math.trunc(x);
    const y1 = Math.min(y0 + 1, side - 1);
    const x1 = Math.min(x0 + 1, side - 1);
    const fy = f(y - y0);
    const fx = f(x - x0);
    const corners: [number, number][] = [
      [y0 * side + x0, f(f(1 - fy) * f(1 - fx))],
      [y0 * side + x1, f(f(1 - fy) * fx)],
      [y1 * side + x0, f(fy * f(1 - fx))],
      [y1 * side + x1, f(fy * fx)],
    ];
    corners.forEach(([idx, wt], k) => {
      index[k * n + i] = idx;
      weight[k * n + i] = wt;
    });
  }
  return { index, weight };
}

/** sum_k weight[k] * table[index[k]] -> (patches, hidden) float32; table (numPositions, hidden) row-major. */
export function interpolatePositions(table: Float32Array, hidden: number, c: PositionCorners): Float32Array {
  const n = c.index.length / 4;
  const out = new Float32Array(n * hidden);
  for (let i = 0; i < n; i++) {
    for (let d = 0; d < hidden; d++) {
      let s = 0;
      for (let k = 0; k < 4; k++) s += f(table[c.index[k * n + i]! * hidden + d]! * c.weight[k * n + i]!);
      out[i * hidden + d] = s;
    }
  }
  return out;
}

/**
 * get_rope_index for one unpadded sequence: (t, h, w) position rows. Every maximal run of `imageTokenId` is one
 * image, matched in order with `grids` (patch grids [1, H, W]); a run must hold exactly (H/merge)(W/merge) tokens.
 */
export function qwen3VlRopeIndex(
  ids: ArrayLike<number>,
  imageTokenId: number,
  grids: readonly (readonly [number, number, number])[],
  merge: number,
): [Float64Array, Float64Array, Float64Array] {
  const L = ids.length;
  const pt = new Float64Array(L);
  const ph = new Float64Array(L);
  const pw = new Float64Array(L);
  let pos = 0;
  let image = 0;
  for (let i = 0; i < L; ) {
    if (ids[i] !== imageTokenId) {
      pt[i] = ph[i] = pw[i] = pos++;
      i++;
      continue;
    }
    let n = 0;
    while (i + n < L && ids[i + n] === imageTokenId) n++;
    const g = grids[image];
    if (!g) throw new RangeError(`qwen3VlRopeIndex: image run ${image + 1} at token ${i} but only ${grids.length} grids`);
    const [t, gh, gw] = [g[0], g[1] / merge, g[2] / merge];
    if (n !== t * gh * gw) throw new RangeError(`qwen3VlRopeIndex: image ${image + 1} has ${n} tokens, its grid [${g}] needs ${t * gh * gw}`);
    for (let k = 0; k < n; k++) {
      pt[i + k] = pos + Math.floor(k / (gh * gw));
      ph[i + k] = pos + (Math.floor(k / gw) % gh);
      pw[i + k] = pos + (k % gw);
    }
    pos += Math.max(gh, gw);
    i += n;
    image++;
  }
  if (image !== grids.length) throw new RangeError(`qwen3VlRopeIndex: ${grids.length} grids for ${image} image runs`);
  return [pt, ph, pw];
}
