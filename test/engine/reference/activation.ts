// CPU reference for shaders/activation.wgsl: float64, logical row-major host arrays.
import type { HostTensor } from '../helpers';

/** erf in float64: Maclaurin series for |x| <= 3, the erfc continued fraction beyond (both ~1e-15 here). */
export function erfRef(x: number): number {
  const z = Math.abs(x);
  let r: number;
  if (z <= 3) {
    let term = z;
    let sum = z;
    for (let n = 1; Math.abs(term) > 1e-17 * Math.abs(sum); n++) {
      term *= (-z * z) / n;
      sum += term / (2 * n + 1);
    }
    r = (2 / Math.sqrt(Math.PI)) * sum;
  } else {
    let k = z;
    for (let n = 80; n >= 1; n--) k = z + n / 2 / k;
    r = 1 - Math.exp(-z * z) / (Math.sqrt(Math.PI) * k);
  }
  return x < 0 ? -r : r;
}

export type ActRef = 'gelu' | 'gelu_tanh' | 'silu';

export function actRef(act: ActRef, x: number): number {
  switch (act) {
    case 'gelu': return 0.5 * x * (1 + erfRef(x / Math.SQRT2));
    case 'gelu_tanh': return 0.5 * x * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (x + 0.044715 * x ** 3)));
    case 'silu': return x / (1 + Math.exp(-x));
  }
}

export function unaryRef(act: ActRef, x: HostTensor): HostTensor {
  return { data: x.data.map((v) => actRef(act, v)), shape: [...x.shape] };
}

/** act(gate) * up, both [..., F]. */
export function gluRef(act: ActRef, gate: HostTensor, up: HostTensor): HostTensor {
  return { data: gate.data.map((g, i) => actRef(act, g) * up.data[i]!), shape: [...gate.shape] };
}

/** x + 1/(beta + 1e-9) sin^2(alpha x) with alpha/beta [C] on dim cdim (exp'd first when logScale). */
export function snakeRef(x: HostTensor, cdim: number, alpha: HostTensor, beta?: HostTensor, logScale = false): HostTensor {
  const inner = x.shape.slice(cdim + 1).reduce((a, n) => a * n, 1);
  const c = x.shape[cdim]!;
  const out = new Float64Array(x.data.length);
  for (let i = 0; i < out.length; i++) {
    const ch = Math.floor(i / inner) % c;
    let a = alpha.data[ch]!;
    let b = (beta ?? alpha).data[ch]!;
    if (logScale) [a, b] = [Math.exp(a), Math.exp(b)];
    out[i] = x.data[i]! + Math.sin(a * x.data[i]!) ** 2 / (b + 1e-9);
  }
  return { data: out, shape: [...x.shape] };
}
