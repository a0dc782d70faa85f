// What the recorded work costs: dispatches, floating-point operations and bytes bound, counted as the recorder
// records (the same on a GPU and in the shape-only engine, plan-device.ts). Plans and benches read it per stage
// by taking snapshots and subtracting them.
//   flops: what the op says it does (Dispatch.flops): 2 M N K for a GEMM and a GEMV, 4 B H Lq Lk D for attention
//          (masks not subtracted: the kernels visit every key tile), 2 (output positions) (Cin/groups x taps) Cout
//          for a convolution; any other op counts one per output element (its first binding).
//   bytes: the bytes of each distinct tensor bound (read or written once each): what the op must move at least.
import type { Binding } from './bind-groups';
import { Tensor } from './tensor';

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

export class Meter {
  private readonly total = noWork();

  /** Counts one dispatch over `bindings`; `flops` as its op gave it, else one per element of bindings[0]. */
  dispatch(bindings: readonly Binding[], flops?: number): void {
    this.total.dispatches++;
    this.total.flops += flops ?? (bindings[0] instanceof Tensor ? bindings[0].numel : 0);
    this.total.bytes += boundBytes(bindings);
  }

  /** Everything counted since the engine was made. */
  snapshot(): Work {
    return { ...this.total };
  }
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
