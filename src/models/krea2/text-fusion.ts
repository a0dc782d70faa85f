// Krea 2's text fusion (krea-ai/krea-2 mmdit.TextFusionTransformer), weights under `txtfusion.`:
//   taps (B, L, n, d): n selected hidden states of the text encoder per token (12 for Qwen3-VL-4B)
//   layerwise_blocks.{0,1}   TextFusionBlocks over each token's n taps (the taps are the sequence: (B L, n, d))
//   projector                Linear(n -> 1, no bias): a learned mix of the taps -> (B, L, d)
//   refiner_blocks.{0,1}     TextFusionBlocks over the tokens, no RoPE
// Upstream runs the refiner over the padded 512 rows with a pairwise mask; here the caller passes the real tokens
// only (prompt + template suffix), which gives the same rows: a masked key contributes nothing, the layerwise stage
// and the projector are per token, and without RoPE nothing depends on where a token sits.
import type { Engine } from '../../engine/engine';
import { linear } from '../common/lora-linear'; // the engine's linear plus attached LoRA terms
import type { Tensor } from '../../engine/tensor';
import { loadPlain, type WeightLoader } from '../common/weights';
import { Krea2TextFusionBlock } from './blocks';
import { KREA2_FUSION_BLOCKS, type Krea2Config } from './config';

export interface TextFusionTrace {
  layerwise: Tensor[];
  projected: Tensor;
  refiner: Tensor[];
}

export class Krea2TextFusion {
  constructor(
    readonly layerwise_blocks: Krea2TextFusionBlock[],
    /** projector.weight (1, n), kept in the compute dtype (n numbers: never quantised). */
    readonly projector: { weight: Tensor },
    readonly refiner_blocks: Krea2TextFusionBlock[],
    readonly config: Krea2Config,
  ) {}

  /** `p`: "txtfusion." under the DiT's prefix. */
  static async load(w: WeightLoader, cfg: Krea2Config, p: string): Promise<Krea2TextFusion> {
    const block = (q: string) => Krea2TextFusionBlock.load(w, q, cfg.txtdim, cfg.txtheads, cfg.txtkvheads, cfg.txtMlpDim);
    const layerwise: Krea2TextFusionBlock[] = [];
    for (let i = 0; i < KREA2_FUSION_BLOCKS; i++) layerwise.push(await block(`${p}layerwise_blocks.${i}.`));
    const projector = { weight: await loadPlain(w, `${p}projector.weight`, [1, cfg.txtlayers]) };
    const refiner: Krea2TextFusionBlock[] = [];
    for (let i = 0; i < KREA2_FUSION_BLOCKS; i++) refiner.push(await block(`${p}refiner_blocks.${i}.`));
    return new Krea2TextFusion(layerwise, projector, refiner, cfg);
  }

  /**
   * taps (B, L, n, d) of the real tokens -> (B, L, d), a new tensor. With `trace`, every stage's output is kept
   * there for the caller to free (tests).
   */
  forward(e: Engine, taps: Tensor, trace?: TextFusionTrace): Tensor {
    const { txtlayers: n, txtdim: d } = this.config;
    if (taps.rank !== 4 || taps.shape[2] !== n || taps.shape[3] !== d) throw new RangeError(`Krea2TextFusion: taps ${taps} must be (B, L, ${n}, ${d})`);
    const [B, L] = taps.shape as [number, number];
    const traced = (t: Tensor) => (trace ? e.keep(t) : t); // the trace's tensors are the caller's
    // one chain: each stage's output freed once the next exists, unless a trace keeps it
    return e.chain(
      () => taps.reshape([B * L, n, d]),
      ...this.layerwise_blocks.map((block) => (x: Tensor) => {
        const next = traced(block.forward(e, x));
        trace?.layerwise.push(next.reshape([B, L, n, d]));
        return next;
      }),
      // (B L, n, d) viewed as (B L, d, n) times projector (1, n)^T -> (B L, d, 1)
      (x) => {
        const y = traced(linear(e, x.permute([0, 2, 1]), this.projector.weight).reshape([B, L, d]));
        if (trace) trace.projected = y;
        return y;
      },
      ...this.refiner_blocks.map((block) => (y: Tensor) => {
        const next = traced(block.forward(e, y));
        trace?.refiner.push(next);
        return next;
      }),
    );
  }

  free(): void {
    for (const b of [...this.layerwise_blocks, ...this.refiner_blocks]) b.free();
    this.projector.weight.free();
  }
}
