// The building blocks of AutoencoderKLQwenImage21 on one frame, channels-last ([N, H, W, C]) throughout.
// Field names are the checkpoint's key path segments (resnets, norm1, conv1, to_qkv, ...), so a module's prefix
// plus its field names are its keys. Upstream's "causal 3D" convs are Conv2d here (one frame, the time axis is
// squeezed away); its RMS_norm is F.normalize over channels * sqrt(C) * gamma, i.e. RMSNorm with eps ~ 0 per pixel.
import type { Engine } from '../../../engine/engine';
import { silu } from '../../../engine/ops/activation';
import { conv2d, type PadPair, type PreparedConvWeight } from '../../../engine/ops/conv';
import { add, mul } from '../../../engine/ops/elementwise';
import { linear } from '../../../engine/ops/linear';
import { matmul } from '../../../engine/ops/matmul';
import { rmsNorm } from '../../../engine/ops/norm';
import { upsampleNearest } from '../../../engine/ops/resample';
import { softmax } from '../../../engine/ops/softmax';
import { Tensor } from '../../../engine/tensor';
import { loadConvWeight, prepareRawConvWeight } from '../../common/conv-weights';
import { keyOf, loadPlain, uploadTracked, type WeightLoader } from '../../common/weights';

/** Upstream's F.normalize clamps the norm at 1e-12; as RMSNorm that is mean(x^2) >= 1e-24 / C (only 0 rows differ). */
const rmsEps = (c: number) => 1e-24 / c;

/** nn.Conv2d with bias: weight [Cout, Cin, k, k] (prepared for the conv kernel), bias [Cout]. */
export class VaeConv2d {
  private constructor(readonly weight: PreparedConvWeight, readonly bias: Tensor, readonly k: number, readonly cout: number) {}

  static async load(w: WeightLoader, p: string, cin: number, cout: number, k: number): Promise<VaeConv2d> {
    const key = keyOf(w, `${p}weight`);
    if (w.ckpt.has(key) && w.ckpt.entry(key).shape.length === 5) return VaeConv2d.loadCausalFirstFrame(w, p, cin, cout, k);
    const weight = await loadConvWeight(w, `${p}weight`, [cout, cin, k, k]);
    return new VaeConv2d(weight, await loadPlain(w, `${p}bias`, [cout]), k, cout);
  }

  /**
   * A causal Conv3d [Cout, Cin, kt, k, k] (the Qwen-Image / Wan 2.1 VAE's) on a first frame: upstream pads kt - 1
   * zero frames in front, so only the kernel's last time slice meets the frame and the conv is this Conv2d.
   */
  static async loadCausalFirstFrame(w: WeightLoader, p: string, cin: number, cout: number, k: number): Promise<VaeConv2d> {
    const key = keyOf(w, `${p}weight`);
    const kt = w.ckpt.entry(key).shape[2]!;
    w.ckpt.entry(key, [cout, cin, kt, k, k]);
    const all = await w.ckpt.readFloat32(key);
    const kk = k * k;
    const last = new Float32Array(cout * cin * kk);
    for (let oc = 0; oc < cout * cin; oc++) last.set(all.subarray((oc * kt + kt - 1) * kk, (oc * kt + kt) * kk), oc * kk);
    w.ckpt.entry(keyOf(w, `${p}bias`), [cout]);
    return VaeConv2d.fromHost(w, last, await w.ckpt.readFloat32(keyOf(w, `${p}bias`)), cin, cout, k, key);
  }

  /** From host values (weights folded at load, fixed shortcut weights): weight [Cout, Cin, k, k] flat. */
  static fromHost(w: WeightLoader, weight: ArrayLike<number>, bias: ArrayLike<number>, cin: number, cout: number, k: number, label: string): VaeConv2d {
    const raw = w.e.upload(weight, [cout, cin, k, k], w.dtype, `${label}.weight`);
    const b = uploadTracked(w, bias, [cout], `${label}.bias`);
    return new VaeConv2d(prepareRawConvWeight(w, raw), b, k, cout);
  }

  /**
   * post_quant_conv (1x1, z -> z, at `prefix`) applied to latents * std + mean, folded on the host in float64:
   * W' = W diag(std), b' = b + W mean, so the decoder takes the sampler's normalised latents as they are. The caller
   * checks the weight's shape (its rank differs between checkpoints).
   */
  static async foldedPostQuant(w: WeightLoader, prefix: string, z: number, mean: readonly number[], std: readonly number[], label: string): Promise<VaeConv2d> {
    w.ckpt.entry(keyOf(w, `${prefix}bias`), [z]);
    const W = await w.ckpt.readFloat32(keyOf(w, `${prefix}weight`));
    const b = await w.ckpt.readFloat32(keyOf(w, `${prefix}bias`));
    const wf = new Float64Array(z * z);
    const bf = new Float64Array(z);
    for (let o = 0; o < z; o++) {
      let acc = b[o]!;
      for (let i = 0; i < z; i++) {
        wf[o * z + i] = W[o * z + i]! * std[i]!;
        acc += W[o * z + i]! * mean[i]!;
      }
      bf[o] = acc;
    }
    return VaeConv2d.fromHost(w, wf, bf, z, z, 1, label);
  }

  /** 3x3: padding 1 (upstream's symmetric pad); 1x1: none. `padding`/`stride` override (the downsampler). */
  forward(e: Engine, x: Tensor, o: { stride?: number; padding?: number | readonly PadPair[] } = {}): Tensor {
    return conv2d(e, x, this.weight, { bias: this.bias, stride: o.stride ?? 1, padding: o.padding ?? (this.k - 1) / 2 });
  }

  free(): void {
    this.weight.free();
    this.bias.free();
  }
}

/**
 * QwenImage21RMS_norm: y = x / rms(x) * gamma over the channels of each pixel. gamma is stored [C, 1, 1, 1]
 * (images=False: the resnets and heads) or [C, 1, 1] (images=True: the attention's norm).
 */
export class VaeRmsNorm {
  private constructor(readonly gamma: Tensor) {}

  static async load(w: WeightLoader, p: string, c: number, images = false): Promise<VaeRmsNorm> {
    return new VaeRmsNorm((await loadPlain(w, `${p}gamma`, images ? [c, 1, 1] : [c, 1, 1, 1])).reshape([c]));
  }

  forward(e: Engine, x: Tensor): Tensor {
    return rmsNorm(e, x, { weight: this.gamma, eps: rmsEps(this.gamma.shape[0]!) });
  }

  free(): void {
    this.gamma.free();
  }
}

/** silu(norm(x)), the pre-activation every conv of a resnet and the heads get. */
export function normSilu(e: Engine, n: VaeRmsNorm, x: Tensor): Tensor {
  return e.chain(() => n.forward(e, x), (y) => silu(e, y));
}

/** QwenImage21ResidualBlock: conv2(silu(norm2(conv1(silu(norm1(x)))))) + conv_shortcut(x) (identity if in == out). */
export class VaeResidualBlock {
  private constructor(
    readonly norm1: VaeRmsNorm,
    readonly conv1: VaeConv2d,
    readonly norm2: VaeRmsNorm,
    readonly conv2: VaeConv2d,
    readonly conv_shortcut: VaeConv2d | null,
  ) {}

  static async load(w: WeightLoader, p: string, cin: number, cout: number): Promise<VaeResidualBlock> {
    return new VaeResidualBlock(
      await VaeRmsNorm.load(w, `${p}norm1.`, cin),
      await VaeConv2d.load(w, `${p}conv1.`, cin, cout, 3),
      await VaeRmsNorm.load(w, `${p}norm2.`, cout),
      await VaeConv2d.load(w, `${p}conv2.`, cout, cout, 3),
      cin !== cout ? await VaeConv2d.load(w, `${p}conv_shortcut.`, cin, cout, 1) : null,
    );
  }

  forward(e: Engine, x: Tensor): Tensor {
    // scopes free each step's input once its output exists (engine/scope.ts), the order of freeing by hand
    return e.scope(() => {
      const h2 = e.chain(
        () => normSilu(e, this.norm1, x),
        (a) => this.conv1.forward(e, a),
        (h1) => normSilu(e, this.norm2, h1),
        (b) => this.conv2.forward(e, b),
      );
      return add(e, h2, this.conv_shortcut ? this.conv_shortcut.forward(e, x) : x);
    });
  }

  free(): void {
    for (const m of [this.norm1, this.conv1, this.norm2, this.conv2, this.conv_shortcut]) m?.free();
  }
}

/** Bytes one attention score chunk may take (rows of [rows, L] f32/f16 scores). */
const SCORE_CHUNK_BYTES = 256 * 2 ** 20;

/**
 * QwenImage21AttentionBlock: one head of width C over the H*W pixels, x + proj(softmax(q k^T / sqrt(C)) v) with
 * q, k, v = to_qkv(norm(x)) (1x1 convs = linears over channels). C is 768 / 1152 in the released model, past the
 * flash kernel's head-dim limit, so this is matmul + softmax + matmul in query-row chunks that bound the scores.
 */
export class VaeAttentionBlock {
  private constructor(readonly norm: VaeRmsNorm, readonly qkvW: Tensor, readonly qkvB: Tensor, readonly projW: Tensor, readonly projB: Tensor) {}

  static async load(w: WeightLoader, p: string, c: number): Promise<VaeAttentionBlock> {
    return new VaeAttentionBlock(
      await VaeRmsNorm.load(w, `${p}norm.`, c, true),
      (await loadPlain(w, `${p}to_qkv.weight`, [3 * c, c, 1, 1])).reshape([3 * c, c]),
      await loadPlain(w, `${p}to_qkv.bias`, [3 * c]),
      (await loadPlain(w, `${p}proj.weight`, [c, c, 1, 1])).reshape([c, c]),
      await loadPlain(w, `${p}proj.bias`, [c]),
    );
  }

  forward(e: Engine, x: Tensor): Tensor {
    const [N, H, W, C] = x.shape as [number, number, number, number];
    const L = H * W;
    const rows = Math.max(1, Math.min(L, Math.floor(SCORE_CHUNK_BYTES / (L * 4))));
    return e.chain(
      () => {
        // qkv and q freed once the attention rows are all written
        const qkv = e.chain(() => this.norm.forward(e, x), (n) => linear(e, n.reshape([N, L, C]), this.qkvW, this.qkvB)); // [N, L, 3C]
        const q = mul(e, qkv.slice(2, 0, C), 1 / Math.sqrt(C)); // contiguous [N, L, C]
        const kT = qkv.slice(2, C, 2 * C).transpose(1, 2); // [N, C, L] view
        const v = qkv.slice(2, 2 * C, 3 * C);
        const attn = e.empty([N, L, C], x.dtype, 'vae attention');
        for (let b = 0; b < N; b++) {
          for (let r0 = 0; r0 < L; r0 += rows) {
            const r1 = Math.min(L, r0 + rows);
            const dst = attn.slice(0, b, b + 1).slice(1, r0, r1); // a contiguous view at an offset (rows r0..r1 of item b)
            e.chain(
              () => matmul(e, q.slice(0, b, b + 1).slice(1, r0, r1), kT.slice(0, b, b + 1)), // [1, r, L]
              (s) => softmax(e, s),
              (pr) => matmul(e, pr, v.slice(0, b, b + 1), { out: dst }),
            );
          }
        }
        return attn;
      },
      (attn) => linear(e, attn, this.projW, this.projB, { residual: x.reshape([N, L, C]) }).reshape([N, H, W, C]),
    );
  }

  free(): void {
    for (const t of [this.norm, this.qkvW, this.qkvB, this.projW, this.projB]) t.free();
  }
}

/** QwenImage21MidBlock with one attention: resnets.0, attentions.0, resnets.1. */
export class VaeMidBlock {
  private constructor(readonly resnets: VaeResidualBlock[], readonly attentions: VaeAttentionBlock[]) {}

  static async load(w: WeightLoader, p: string, c: number): Promise<VaeMidBlock> {
    const r0 = await VaeResidualBlock.load(w, `${p}resnets.0.`, c, c);
    const a0 = await VaeAttentionBlock.load(w, `${p}attentions.0.`, c);
    const r1 = await VaeResidualBlock.load(w, `${p}resnets.1.`, c, c);
    return new VaeMidBlock([r0, r1], [a0]);
  }

  forward(e: Engine, x: Tensor): Tensor {
    return e.chain(
      () => this.resnets[0]!.forward(e, x),
      (a) => this.attentions[0]!.forward(e, a),
      (b) => this.resnets[1]!.forward(e, b),
    );
  }

  free(): void {
    [...this.resnets, ...this.attentions].forEach((m) => m.free());
  }
}

/** Runs resnets in order, freeing every intermediate (not x). */
export function runResnets(e: Engine, resnets: readonly VaeResidualBlock[], x: Tensor): Tensor {
  return e.chain(() => x, ...resnets.map((r) => (h: Tensor) => r.forward(e, h)));
}

/**
 * QwenImage21DupUp3D on one frame (first_chunk): output pixel (2h + i, 2w + j), channel o reads input channel
 * floor((o * f + (ft - 1) * 4 + 2i + j) / repeats), f = ft * 4, repeats = Cout * f / Cin. For the layouts that
 * occur (Cin a multiple of Cout) that index is affine in (o, i, j), so the shortcut is a strided view of the block's
 * input [N, h, w, Cin] as [N, h, 2, w, 2, Cout] and costs nothing but the add.
 */
export class DupUpShortcut {
  private readonly coef: { o: number; i: number; j: number; base: number };

  constructor(readonly cin: number, readonly cout: number, readonly temporal: boolean) {
    const ft = temporal ? 2 : 1;
    const f = ft * 4;
    if ((cout * f) % cin !== 0) throw new RangeError(`DupUp3D: ${cin} -> ${cout} channels with factor ${f} do not divide`);
    const rep = (cout * f) / cin;
    const src = (o: number, i: number, j: number) => Math.floor((o * f + (ft - 1) * 4 + 2 * i + j) / rep);
    const base = src(0, 0, 0);
    this.coef = { o: cout > 1 ? src(1, 0, 0) - base : 0, i: src(0, 1, 0) - base, j: src(0, 0, 1) - base, base };
    for (let o = 0; o < cout; o++) {
      for (let i = 0; i < 2; i++) {
        for (let j = 0; j < 2; j++) {
          if (src(o, i, j) !== base + this.coef.o * o + this.coef.i * i + this.coef.j * j) {
            throw new RangeError(`DupUp3D: ${cin} -> ${cout} channels (temporal ${temporal}) is not a strided view; not built`);
          }
        }
      }
    }
  }

  /** y [N, 2h, 2w, Cout] (contiguous, the main path) + the shortcut of x [N, h, w, Cin]: a new [N, 2h, 2w, Cout]. */
  addTo(e: Engine, y: Tensor, x: Tensor): Tensor {
    const [N, h, w] = x.shape as [number, number, number, number];
    const [sN, sH, sW, sC] = x.strides as [number, number, number, number];
    const c = this.coef;
    const view = new Tensor(x.storage, [N, h, 2, w, 2, this.cout], x.dtype, [sN, sH, c.i * sC, sW, c.j * sC, c.o * sC], x.offset + c.base * sC);
    return add(e, y.reshape([N, h, 2, w, 2, this.cout]), view).reshape([N, 2 * h, 2 * w, this.cout]);
  }
}

/**
 * QwenImage21AvgDown3D on one frame as a fixed conv (kernel = stride = fs): the frame is padded with ft - 1 zero
 * frames in front, (c, t, i, j) flattened as c * f + t * fs^2 + i * fs + j, and output channel o averages the group
 * [o * g, (o + 1) * g), g = Cin * f / Cout. So W[o, c, i, j] = 1 / g where (c, ft - 1, i, j) falls in o's group; the
 * zero frames only dilute the mean (with ft = 2 every other output channel is 0).
 */
export function avgDownWeights(cin: number, cout: number, temporal: boolean, spatial: boolean): { weight: Float64Array; k: number } {
  const ft = temporal ? 2 : 1;
  const fs = spatial ? 2 : 1;
  const f = ft * fs * fs;
  if ((cin * f) % cout !== 0) throw new RangeError(`AvgDown3D: ${cin} -> ${cout} channels with factor ${f} do not divide`);
  const g = (cin * f) / cout;
  const weight = new Float64Array(cout * cin * fs * fs);
  for (let c = 0; c < cin; c++) {
    for (let i = 0; i < fs; i++) {
      for (let j = 0; j < fs; j++) {
        const o = Math.floor((c * f + (ft - 1) * fs * fs + i * fs + j) / g);
        weight[((o * cin + c) * fs + i) * fs + j] = 1 / g;
      }
    }
  }
  return { weight, k: fs };
}

/** Nearest 2x upsampling then the 3x3 conv (upstream's resample = Sequential(Upsample, Conv2d): key resample.1). */
export function upsample2x(e: Engine, conv: VaeConv2d, x: Tensor): Tensor {
  return e.chain(() => upsampleNearest(e, x, 2), (u) => conv.forward(e, u));
}

/** ZeroPad2d((0, 1, 0, 1)) then the 3x3 stride-2 conv (key resample.1). */
export function downsample2x(e: Engine, conv: VaeConv2d, x: Tensor): Tensor {
  return conv.forward(e, x, { stride: 2, padding: [[0, 1], [0, 1]] });
}

