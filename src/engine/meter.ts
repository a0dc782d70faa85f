// What the recorded work costs: dispatches, floating-point operations and bytes bound, counted as the recorder
// records (the same on a GPU and in the shape-only engine, plan-device.ts). Plans and benches read it per stage
// by taking snapshots and subtracting them.
//   flops: what the op says it does (Dispatch.flops): 2 M N K for a GEMM and a GEMV, 4 B H Lq Lk D for attention
//          (masks not subtracted: the kernels visit every key tile), 2 (output positions) (Cin/groups x taps) Cout
//          for a convolution; any other op counts one per output element (its first binding).
//   bytes: the bytes of each distinct tensor bound (read or written once each): what the op must move at least.
// The same counts are kept per rate class (RateClass: the GEMM by the tuning table's shape class, attention,
// convolution, the rest), so a plan can turn each class's work into seconds at the rate measured for it
// (src/plan/step-time.ts, the tuning table's `rates`).
import type { Binding } from './bind-groups';
import { Tensor } from './tensor';
import { shapeClass } from './tuning';

/** What decides how fast a dispatch runs: a GEMM's shape class (its output's size), attention, a convolution, or
 * 'memory' for everything else (elementwise, norms, softmax, GEMVs, copies: bound by the bytes they move). */
export type RateClass = 'gemm-small' | 'gemm-medium' | 'gemm-large' | 'attention' | 'conv' | 'memory';

export const RATE_CLASSES: readonly RateClass[] = ['gemm-small', 'gemm-medium', 'gemm-large', 'attention', 'conv', 'memory'];

/** A GEMM's shape label: 'gemm MxKxN', with ' x B' for B > 1 batches. */
export const gemmShape = (batches: number, M: number, K: number, N: number): string => `gemm ${M}x${K}x${N}${batches > 1 ? ` x${batches}` : ''}`;

/** An attention's shape label: 'attention B H/Hkv Lq Lk D mask'. */
export const attentionShape = (B: number, Hq: number, Hkv: number, Lq: number, Lk: number, D: number, mask: string): string =>
  `attention B${B} H${Hq}${Hkv !== Hq ? `/${Hkv}` : ''} Lq${Lq} Lk${Lk} D${D}${mask !== 'none' ? ` ${mask}` : ''}`;

/** A GEMM's rate class: the shape class the tuning table picks its kernel by (M x N output). */
export const gemmRate = (M: number, N: number): RateClass => `gemm-${shapeClass(M, N)}`;

export interface Work {
  dispatches: number;
  flops: number;
  bytes: number;
}

export const noWork = (): Work => ({ dispatches: 0, flops: 0, bytes: 0 });

/** a - b, field by field (the work between two snapshots). */
export function workSince(a: Work, b: Work): Work {
  return { dispatches: a.dispatches - b.dispatches, flops: a.flops - b.flops, bytes: a.bytes - b.bytes };
}

/** Work per kernel shape (a GEMM's or an attention's dims, Dispatch.shape): what a sweep at a model's real shapes
 * times (npm run plan's per_step.shapes). */
export interface ShapeWork {
  dispatches: number;
  flops: number;
}

export class Meter {
  private readonly total = noWork();
  private readonly classes = new Map<RateClass, Work>(RATE_CLASSES.map((c) => [c, noWork()]));
  private readonly shapes = new Map<string, ShapeWork>();

  /** Counts one dispatch over `bindings`; `flops` as its op gave it, else one per element of bindings[0]; `rate`
   * the class it runs at (default 'memory'). */
  dispatch(bindings: readonly Binding[], flops?: number, rate: RateClass = 'memory', shape?: string): void {
    const f = flops ?? (bindings[0] instanceof Tensor ? bindings[0].numel : 0);
    const b = boundBytes(bindings);
    for (const w of [this.total, this.classes.get(rate)!]) {
      w.dispatches++;
      w.flops += f;
      w.bytes += b;
    }
    if (shape !== undefined) {
      const s = this.shapes.get(shape) ?? { dispatches: 0, flops: 0 };
      this.shapes.set(shape, { dispatches: s.dispatches + 1, flops: s.flops + f });
    }
  }

  /** Work per kernel shape since the engine was made. */
  snapshotShapes(): Map<string, ShapeWork> {
    return new Map(this.shapes);
  }

  /** Everything counted since the engine was made. */
  snapshot(): Work {
    return { ...this.total };
  }

  /** Everything counted since the engine was made, per rate class. */
  snapshotByRate(): Record<RateClass, Work> {
    return Object.fromEntries(RATE_CLASSES.map((c) => [c, { ...this.classes.get(c)! }])) as Record<RateClass, Work>;
  }
}

/** a - b per shape (shapes with no dispatches between the two left out). */
export function shapesSince(a: Map<string, ShapeWork>, b: Map<string, ShapeWork>): Map<string, ShapeWork> {
  const out = new Map<string, ShapeWork>();
  for (const [k, w] of a) {
    const d = w.dispatches - (b.get(k)?.dispatches ?? 0);
    if (d > 0) out.set(k, { dispatches: d, flops: w.flops - (b.get(k)?.flops ?? 0) });
  }
  return out;
}

/** a - b per rate class. */
export function workByRateSince(a: Record<RateClass, Work>, b: Record<RateClass, Work>): Record<RateClass, Work> {
  return Object.fromEntries(RATE_CLASSES.map((c) => [c, workSince(a[c], b[c])])) as Record<RateClass, Work>;
}

/** Bytes of the distinct tensors (and raw buffer ranges) bound: a tensor bound twice (an unused input) counts once. */
export function boundBytes(bindings: readonly Binding[]): number {
  const seen = new Set<Binding>();
  let bytes = 0;
  for (const b of bindings) {
    if (seen.has(b)) continue;
    seen.add(b);
    bytes += b instanceof Tensor ? b.numel * b.bytesPerElement : (b.size ?? 0);
  }
  return bytes;
}
