// The codec's padded convolutions on channels-last activations x (1, L, C):
//   CausalConv1d           upstream Qwen3TTSTokenizerV2CausalConvNet and transformers' MimiConv1d (causal): left
//                          padding k_eff - stride (k_eff = (k - 1) * dilation + 1), then right padding that completes
//                          the last stride (_get_extra_padding_for_conv1d), zeros or replicated edge values.
//                          Output length ceil(L / stride).
//   CausalConvTranspose1d  Qwen3TTSTokenizerV2CausalTransConvNet: the full transposed conv with the last
//                          k - stride positions dropped. Output length L * stride.
// Keys: `<prefix>conv.weight`, `<prefix>conv.bias` (PyTorch layouts, re-laid once at load).
import type { Engine } from '../../../engine/engine';
import { conv1d, convTranspose1d, type PadMode, type PreparedConvWeight } from '../../../engine/ops/conv';
import type { Tensor } from '../../../engine/tensor';
import { loadConvWeight } from '../../common/conv-weights';
import { loadPlain, type WeightLoader } from '../../common/weights';

/** Right padding that makes the strided conv cover every input sample (upstream _get_extra_padding_for_conv1d). */
export function extraPadding(length: number, kEff: number, stride: number): number {
  const pad = kEff - stride;
  const frames = Math.ceil((length - kEff + pad) / stride + 1);
  return (frames - 1) * stride + (kEff - pad) - length;
}

export interface CausalConvSpec {
  cin: number;
  cout: number;
  k: number;
  stride?: number;
  dilation?: number;
  groups?: number;
  bias?: boolean;
  padMode?: PadMode;
}

export class CausalConv1d {
  private constructor(
    readonly spec: Required<CausalConvSpec>,
    /** conv.weight [cout, cin/groups, k], prepared. */
    readonly weight: PreparedConvWeight,
    /** conv.bias [cout] or null. */
    readonly bias: Tensor | null,
  ) {}

  /** `p` is the module's key prefix, e.g. "decoder.pre_conv." (the nn.Conv1d sits at `p + "conv."`). */
  static async load(w: WeightLoader, p: string, s: CausalConvSpec): Promise<CausalConv1d> {
    const spec: Required<CausalConvSpec> = { stride: 1, dilation: 1, groups: 1, bias: true, padMode: 'zeros', ...s };
    const weight = await loadConvWeight(w, `${p}conv.weight`, [spec.cout, spec.cin / spec.groups, spec.k], { groups: spec.groups });
    const bias = spec.bias ? await loadPlain(w, `${p}conv.bias`, [spec.cout]) : null;
    return new CausalConv1d(spec, weight, bias);
  }

  /** x (1, L, cin), any view -> (1, ceil(L / stride), cout). */
  forward(e: Engine, x: Tensor): Tensor {
    const { k, stride, dilation, groups, padMode } = this.spec;
    const kEff = (k - 1) * dilation + 1;
    const right = extraPadding(x.shape[1]!, kEff, stride);
    return conv1d(e, x, this.weight, {
      stride, dilation, groups, padMode,
      padding: [[kEff - stride, right]],
      bias: this.bias ?? undefined,
    });
  }

  free(): void {
    this.weight.free();
    this.bias?.free();
  }
}

export class CausalConvTranspose1d {
  private constructor(
    readonly stride: number,
    readonly k: number,
    /** conv.weight [cin, cout, k], prepared. */
    readonly weight: PreparedConvWeight,
    readonly bias: Tensor,
  ) {}

  static async load(w: WeightLoader, p: string, cin: number, cout: number, k: number, stride: number): Promise<CausalConvTranspose1d> {
    const weight = await loadConvWeight(w, `${p}conv.weight`, [cin, cout, k], { transposed: true });
    return new CausalConvTranspose1d(stride, k, weight, await loadPlain(w, `${p}conv.bias`, [cout]));
  }

  /** x (1, L, cin) -> (1, L * stride, cout). */
  forward(e: Engine, x: Tensor): Tensor {
    return convTranspose1d(e, x, this.weight, { stride: this.stride, padding: [[0, this.k - this.stride]], bias: this.bias });
  }

  free(): void {
    this.weight.free();
    this.bias.free();
  }
}
