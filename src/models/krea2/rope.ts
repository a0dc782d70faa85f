// Krea 2's positions and rotary tables (krea-ai/krea-2 sampling.prepare, mmdit.rope / PositionalEncoding):
//   positions   text rows (0, 0, 0); image token at patch row r, column c: (0, r, c)          (L, 3)
//   axis i of width d_i rotates pairs j < d_i / 2 by pos_i * theta^(-2j / d_i)           (float64, then float32)
//   the axes' pairs are concatenated: pairs [0, d0/2) axis 0, then axis 1, then axis 2; a pair is adjacent head dims
//   (2p, 2p + 1) (Flux style: the engine's 'interleaved' rope)
// Text rows all sit at the origin, so text keys and queries are never rotated and their order inside the DiT is
// immaterial (krea2.md §1, "Masks").

/** sampling.prepare's positions for `textLength` text rows followed by an h x w patch grid, row-major: (L, 3). */
export function krea2Positions(textLength: number, gridH: number, gridW: number): Float32Array {
  const pos = new Float32Array((textLength + gridH * gridW) * 3);
  for (let r = 0; r < gridH; r++) {
    for (let c = 0; c < gridW; c++) {
      const i = textLength + r * gridW + c;
      pos[i * 3 + 1] = r;
      pos[i * 3 + 2] = c;
    }
  }
  return pos;
}

export interface RopeTable {
  /** (rows, pairs) f32 */
  cos: Float32Array;
  sin: Float32Array;
  rows: number;
  pairs: number;
}

/** Rotary tables of positions (L, 3) for the given axis widths (sum = head dim) and base. */
export function krea2RopeTable(positions: ArrayLike<number>, axes: readonly number[], theta: number): RopeTable {
  if (positions.length % 3 !== 0) throw new RangeError(`krea2RopeTable: positions of length ${positions.length} are not (L, 3)`);
  if (axes.length !== 3 || axes.some((d) => !Number.isInteger(d) || d < 0 || d % 2 !== 0)) throw new RangeError(`krea2RopeTable: axes [${axes}] must be 3 even widths`);
  const rows = positions.length / 3;
  const pairs = axes.reduce((a, d) => a + d, 0) / 2;
  const cos = new Float32Array(rows * pairs);
  const sin = new Float32Array(rows * pairs);
  const omegas: number[] = [];
  const axisOf: number[] = [];
  axes.forEach((d, i) => {
    for (let j = 0; j < d / 2; j++) {
      omegas.push(1 / theta ** ((2 * j) / d));
      axisOf.push(i);
    }
  });
  for (let r = 0; r < rows; r++) {
    for (let p = 0; p < pairs; p++) {
      const angle = positions[r * 3 + axisOf[p]!]! * omegas[p]!;
      cos[r * pairs + p] = Math.cos(angle);
      sin[r * pairs + p] = Math.sin(angle);
    }
  }
  return { cos, sin, rows, pairs };
}
