// The codec's activations on channels-last x (..., C):
//   SnakeBeta  upstream's SnakeBeta: x + 1 / (exp(beta) + 1e-9) * sin(exp(alpha) * x)^2, alpha/beta [C] stored as
//              logs (keys `<prefix>alpha`, `<prefix>beta`); the engine's snake op with logScale.
//   elu        torch.nn.ELU (alpha 1): x for x > 0, exp(x) - 1 otherwise (Mimi's SEANet encoder).
import type { Engine } from '../../../engine/engine';
import { snake } from '../../../engine/ops/activation';
import { add, div, maximum, minimum } from '../../../engine/ops/elementwise';
import { pad } from '../../../engine/ops/layout';
import { softmax } from '../../../engine/ops/softmax';
import type { Tensor } from '../../../engine/tensor';
import { loadPlain, type WeightLoader } from './weights';

export class SnakeBeta {
  constructor(
    readonly alpha: Tensor,
    readonly beta: Tensor,
  ) {}

  static async load(w: WeightLoader, p: string, channels: number): Promise<SnakeBeta> {
    return new SnakeBeta(await loadPlain(w, `${p}alpha`, [channels]), await loadPlain(w, `${p}beta`, [channels]));
  }

  forward(e: Engine, x: Tensor): Tensor {
    return snake(e, x, this.alpha, { beta: this.beta, logScale: true });
  }

  free(): void {
    this.alpha.free();
    this.beta.free();
  }
}

/**
 * ELU from tested engine ops, since the engine has no exp/ELU activation yet: with m = min(x, 0),
 * softmax([m, 0]) = [e^m, 1] / (e^m + 1), so e^m = s0 / s1 (s1 in [0.5, 1], no overflow since m <= 0), and
 * ELU(x) = max(x, 0) + e^m - 1. Seven dispatches; replace with an activation-op ELU when activation.ts has one.
 * x any view; returns a new contiguous tensor of x's shape.
 */
export function elu(e: Engine, x: Tensor): Tensor {
  const m = minimum(e, x, 0);
  const pairs = pad(e, m.unsqueeze(-1), [[0, 1]]); // (..., 2): [m, 0]
  m.free();
  const s = softmax(e, pairs);
  pairs.free();
  const last = s.rank - 1;
  const em = div(e, s.slice(last, 0, 1), s.slice(last, 1, 2)); // (..., 1): e^m
  s.free();
  const pos = maximum(e, x, 0);
  const sum = add(e, pos, em.reshape(x.shape)); // max(x, 0) + e^m
  pos.free();
  em.free();
  const out = add(e, sum, -1);
  sum.free();
  return out;
}
