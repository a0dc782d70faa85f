// LoRAs applied beside the linears of a loaded model, without touching (or reloading) its weights:
//   y = epilogue(x W^T + b + sum_i s_i (x A_i^T) B_i^T),  s_i = request scale x alpha / r
// with the engine's own GEMMs: the base linear as it always runs, then per LoRA a rank-r GEMM (x A^T) and a second
// one that adds its B product onto the result (the GEMM's residual epilogue). Where the caller asked for an
// activation or gate epilogue, those are applied after the low-rank terms (elementwise ops), so the term sits inside
// them as upstream's (PEFT's) LoRA layer puts it: act(base(x) + lora(x)).
//
// A model's files import `linear` from here instead of src/engine/ops/linear.ts: the same function, with the same
// arguments, that looks the weight up in the table of attached terms. A weight without terms (no LoRA, or every LoRA
// at scale 0, which attaches nothing) runs the engine's linear unchanged: bit-identical to a model without LoRAs.
import type { Engine } from '../../engine/engine';
import { activation } from '../../engine/ops/activation';
import { add, contiguous, mul } from '../../engine/ops/elementwise';
import { linear as engineLinear, type Int8Weight, type LinearOptions } from '../../engine/ops/linear';
import type { Tensor } from '../../engine/tensor';
import { LoraError, type LoraFile, type LoraModelNames } from './lora';
import type { ComputeDType, LinearWeight } from './weights';

/** One low-rank term on the GPU: down A (r, K) and up B (N, r) with the scale folded in. */
interface LoraTerm {
  down: Tensor;
  up: Tensor;
}

const attached = new WeakMap<object, LoraTerm[]>();

/**
 * A linear whose weight is not one loaded tensor of its own: MiniMax H3's blocks' adaln_proj kept in host memory and
 * streamed through one reused staging buffer (minimax_h3/transformer/adaln.ts). Terms attach to `key` (an object that
 * stands for the module, the HostLinear), and linearAt runs the staged weight with them.
 */
export interface LoraSite {
  key: object;
  shape: readonly [number, number];
  dtype: ComputeDType;
}

const isSite = (w: LinearWeight | LoraSite): w is LoraSite => 'key' in w;
const keyOf = (w: LinearWeight | LoraSite): object => (isSite(w) ? w.key : w);
const shapeOf = (w: LinearWeight | LoraSite) => ('q' in w ? w.q.shape : w.shape) as readonly number[] as [number, number];

/** The engine's linear(x, W, bias, epilogue) plus the LoRA terms attached to W (see the file comment). */
export function linear(e: Engine, x: Tensor, w: Tensor | Int8Weight, bias?: Tensor | null, epi: LinearOptions = {}): Tensor {
  return linearAt(e, w, x, w, bias, epi);
}

/** linear() with the terms attached to `site` (a LoraSite's key) beside the weight `w` that stands for it now. */
export function linearAt(e: Engine, site: object, x: Tensor, w: Tensor | Int8Weight, bias?: Tensor | null, epi: LinearOptions = {}): Tensor {
  const terms = attached.get(site);
  if (!terms || terms.length === 0) return engineLinear(e, x, w, bias, epi);
  const tuning: LinearOptions = { tile: epi.tile, path: epi.path, subgroup: epi.subgroup };
  const act = epi.act && epi.act !== 'none' ? epi.act : undefined;
  const plain = !act && !epi.gate; // the residual (added last) commutes with the terms: it rides the first GEMM
  let z = engineLinear(e, x, w, bias, plain ? { ...tuning, residual: epi.residual } : tuning);
  try {
    terms.forEach((t, i) => {
      const a = engineLinear(e, x, t.down, null, tuning);
      const out = plain && i === terms.length - 1 ? epi.out : undefined;
      const next = engineLinear(e, a, t.up, null, { ...tuning, residual: z, out });
      a.free();
      z.free();
      z = next;
    });
  } catch (err) {
    z.free();
    throw err;
  }
  if (plain) return z;
  let y = z;
  const step = (f: (v: Tensor) => Tensor) => {
    const next = f(y);
    y.free();
    y = next;
  };
  if (act) step((v) => activation(e, act === 'gelu_erf' ? 'gelu' : act, v));
  if (epi.gate) step((v) => mul(e, v, epi.gate!));
  if (epi.residual) step((v) => add(e, v, epi.residual!, epi.out));
  else if (epi.out) step((v) => contiguous(e, v, epi.out));
  return y;
}

/** One LoRA of a request: a loaded file (lora.ts) at a scale. */
export interface LoraUse {
  file: LoraFile;
  scale: number;
}

/** What a loaded model offers a job's LoRAs: its engine, its linears by module name (lora-models.ts), their compute
 * dtype and the module table a file is read against (a pipeline's loraTarget()). */
export interface LoraTarget {
  e: Engine;
  weights: ReadonlyMap<string, LinearWeight | LoraSite>;
  dtype: ComputeDType;
  names: LoraModelNames;
}

/** LoRA terms attached to a loaded model; detach() takes them off and frees them (the model is as loaded again). */
export interface AttachedLoras {
  /** Linears that got a term. */
  readonly linears: number;
  /** GPU bytes the terms hold. */
  readonly bytes: number;
  detach(): void;
}

/**
 * Attaches `uses` to a loaded model's linears (`weights`: lora-models.ts krea2LoraWeights / qwenImage21LoraWeights),
 * in order (several LoRAs on one linear add up). A LoRA at scale 0 attaches nothing. Every pair's module must be one
 * of `weights`, with its shape: checked for all before anything is uploaded.
 */
export function attachLoras(e: Engine, weights: ReadonlyMap<string, LinearWeight | LoraSite>, uses: readonly LoraUse[], dtype: ComputeDType): AttachedLoras {
  for (const { file, scale } of uses) {
    if (!Number.isFinite(scale)) throw new LoraError(`${file.path}: scale ${scale} is not a finite number`);
    for (const p of file.pairs.values()) {
      const w = weights.get(p.module);
      if (!w) throw new LoraError(`${file.path}: ${p.source} adapts ${p.module}, which this loaded model does not have`);
      const [N, K] = shapeOf(w);
      if (p.up.length !== N * p.rank || p.down.length !== p.rank * K) throw new LoraError(`${file.path}: ${p.source} does not fit ${p.module} [${N}, ${K}]`);
    }
  }
  const added: [object, LoraTerm][] = [];
  let bytes = 0;
  try {
    for (const { file, scale } of uses) {
      if (scale === 0) continue;
      for (const p of file.pairs.values()) {
        const w = weights.get(p.module)!;
        const [N, K] = shapeOf(w);
        const s = scale * p.factor;
        // the weight's own dtype where it is a plain tensor (MiniMax H3 keeps its small head / embedding linears in f32
        // under an f16 model), the compute dtype for an int8 one
        const dt = 'q' in w ? dtype : (w.dtype as ComputeDType); // a site: the dtype its staged GEMM computes in
        const down = e.upload(p.down, [p.rank, K], dt, `lora down ${p.module}`);
        const up = e.upload(p.up.map((v) => v * s), [N, p.rank], dt, `lora up ${p.module}`);
        const term = { down, up };
        bytes += (down.numel + up.numel) * down.bytesPerElement;
        const key = keyOf(w);
        const list = attached.get(key) ?? [];
        list.push(term);
        attached.set(key, list);
        added.push([key, term]);
      }
    }
  } catch (err) {
    detach(added);
    throw err;
  }
  let done = false;
  return {
    linears: new Set(added.map(([w]) => w)).size,
    bytes,
    detach() {
      if (done) return;
      done = true;
      detach(added);
    },
  };
}

/**
 * Runs `fn` with `uses` attached to `weights` and takes them off afterwards, also when `fn` throws: one job's LoRAs
 * on a model shared by the jobs a worker runs one after another.
 */
export async function withLoras<T>(e: Engine, weights: ReadonlyMap<string, LinearWeight | LoraSite>, uses: readonly LoraUse[], dtype: ComputeDType, fn: () => Promise<T>): Promise<T> {
  const on = attachLoras(e, weights, uses, dtype);
  try {
    return await fn();
  } finally {
    on.detach();
  }
}

function detach(added: [object, LoraTerm][]): void {
  for (const [w, term] of added) {
    const list = attached.get(w);
    if (list) {
      const i = list.indexOf(term);
      if (i >= 0) list.splice(i, 1);
      if (list.length === 0) attached.delete(w);
    }
    term.down.free();
    term.up.free();
  }
}

/** How many LoRA terms are attached to `w` (tests, diagnostics). */
export function loraTermsOn(w: LinearWeight | LoraSite): number {
  return attached.get(keyOf(w))?.length ?? 0;
}
