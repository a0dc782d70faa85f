// Per-row AdaLN modulation of the packed sequence. Every row reads one row of a table (T * 3, k * H): the table
// row is timestep_index * 3 + modality tag for the blocks, timestep_index for norm_out. Rows of one stream are
// contiguous in the packed sequence, so the sequence is a handful of runs that share a table row:
//   norms:  rmsNorm with `segments` = the run lengths and shift/scale = the runs' table rows gathered [S, H]
//           (up to 8 runs, the norm kernel's limit; more runs fall back to per-row shift/scale tensors);
//   gates:  the gated residual rides in the GEMM epilogue, which broadcasts but knows no runs, so the gate is
//           gathered per row [L, H] (one L x H buffer per gate; the GEMM it feeds reads L x K anyway).
import type { Engine } from '../../../engine/engine';
import { add, mul } from '../../../engine/ops/elementwise';
import { gather, uploadIds } from '../../../engine/ops/layout';
import { rmsNorm } from '../../../engine/ops/norm';
import type { Tensor } from '../../../engine/tensor';

/** The norm kernel's segment limit (src/engine/ops/norm.ts MAX_SEG). */
export const MAX_SEGMENTS = 8;

/** Consecutive rows with the same table row: their lengths and table rows. */
export function rowRuns(rowIds: ArrayLike<number>): { lengths: number[]; ids: number[] } {
  const lengths: number[] = [];
  const ids: number[] = [];
  for (let i = 0; i < rowIds.length; i++) {
    if (i > 0 && rowIds[i] === rowIds[i - 1]) lengths[lengths.length - 1]!++;
    else {
      lengths.push(1);
      ids.push(rowIds[i]!);
    }
  }
  return { lengths, ids };
}

/** Which table row every sequence row reads, uploaded once per forward and shared by every block. */
export class RowModulation {
  private constructor(
    readonly rows: number,
    readonly runs: { lengths: number[]; ids: number[] },
    /** Table row per sequence row (gather ids). */
    private readonly rowIds: Tensor,
    /** Table row per run, or null when the norms go per row. */
    private readonly runIds: Tensor | null,
  ) {}

  /** `perRow` forces the per-row norm path (tests; it is taken anyway past MAX_SEGMENTS runs). */
  static create(e: Engine, rowIds: ArrayLike<number>, opts: { perRow?: boolean } = {}): RowModulation {
    const runs = rowRuns(rowIds);
    const segmented = !opts.perRow && runs.lengths.length <= MAX_SEGMENTS;
    return new RowModulation(rowIds.length, runs, uploadIds(e, rowIds), segmented ? uploadIds(e, runs.ids) : null);
  }

  get segmented(): boolean {
    return this.runIds !== null;
  }

  /**
   * rmsNorm(x) * weight * (1 + scale) + shift for x [1, L, H], with shift and scale the column blocks
   * `shiftAt` and `scaleAt` (in units of H) of the table's rows.
   */
  norm(e: Engine, x: Tensor, table: Tensor, shiftAt: number, scaleAt: number, o: { weight?: Tensor; eps: number }): Tensor {
    const H = x.shape[x.rank - 1]!;
    const col = (t: Tensor, at: number) => t.slice(1, at * H, (at + 1) * H);
    const runIds = this.runIds;
    if (runIds) {
      // the gathered rows [S, k * H] freed once the norm is recorded: later users of the buffer are ordered after it
      return e.scope(() => {
        const g = gather(e, table, runIds);
        return rmsNorm(e, x, { weight: o.weight, eps: o.eps, shift: col(g, shiftAt), scale: col(g, scaleAt), segments: this.runs.lengths });
      });
    }
    return e.scope(() => {
      // y and 1 + scale freed once their product exists, before the shift is gathered
      const m = e.scope(() => mul(e, rmsNorm(e, x, { weight: o.weight, eps: o.eps }), e.chain(() => this.gate(e, table, scaleAt, H), (scale) => add(e, scale, 1))));
      return add(e, m, this.gate(e, table, shiftAt, H));
    });
  }

  /** The column block `at` of every row's table row: [L, H] (a GEMM epilogue gate, broadcast to [1, L, H]). */
  gate(e: Engine, table: Tensor, at: number, H: number, out?: Tensor): Tensor {
    return gather(e, table.slice(1, at * H, (at + 1) * H), this.rowIds, out);
  }

  free(): void {
    this.rowIds.free();
    this.runIds?.free();
  }
}
