// The codec's activations on channels-last x (..., C):
//   SnakeBeta  upstream's SnakeBeta: x + 1 / (exp(beta) + 1e-9) * sin(exp(alpha) * x)^2, alpha/beta [C] stored as
//              logs (keys `<prefix>alpha`, `<prefix>beta`); the engine's snake op with logScale.
//   elu        torch.nn.ELU (alpha 1): x for x > 0, exp(x) - 1 otherwise (Mimi's SEANet encoder); the engine's unary elu.
import type { Engine } from '../../../engine/engine';
import { snake } from '../../../engine/ops/activation';
import { elu as unaryElu } from '../../../engine/ops/unary';
import type { Tensor } from '../../../engine/tensor';
import { loadPlain, type WeightLoader } from '../../common/weights';

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
 * torch.nn.ELU (alpha 1) as one dispatch of the engine's unary elu: x for x > 0, exp(x) - 1 otherwise.
 * x any view; returns a new contiguous tensor of x's shape.
 */
export function elu(e: Engine, x: Tensor): Tensor {
  return unaryElu(e, x, 1);
}
