// The Qwen3-VL vision tower (transformers Qwen3VLVisionModel). Field names are the checkpoint's key paths under
// "model.visual.": patch_embed.proj, pos_embed, blocks.N.{norm1, attn.qkv, attn.proj, norm2, mlp.linear_fc1,
// mlp.linear_fc2}, merger.{norm, linear_fc1, linear_fc2}, deepstack_merger_list.K.{norm, linear_fc1, linear_fc2}.
//
// One image (P patches, merge-block order, see preprocess.ts):
//   x = patch_embed(patches) + pos(grid)            Conv3d with kernel = stride = (T, p, p) is a linear on the
//                                                   patch rows (P, C*T*p*p) -> (P, hidden); pos: the learned table
//                                                   resampled bilinearly (CPU, positions.ts)
//   block: x += proj(attn(rope2d(qkv(LN1(x)))))     full attention inside the image, 2D rotary (rotate-half)
//          x += fc2(gelu_tanh(fc1(LN2(x))))
//   after block deepstack_visual_indexes[k]: deepstack[k] = merger_k(x)   (LN over the 4 merged rows, post-shuffle)
//   embeds = merger(x):  LN(hidden) per patch, 4 consecutive patches -> one row (4 hidden), fc1, GELU (erf), fc2
// Images are run one at a time (upstream's cu_seqlens: no attention across images); outputs are concatenated in
// order: embeds and each deepstack (sum of P_i / 4, out_hidden). LayerNorm eps 1e-6 everywhere.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Engine } from '../../engine/engine';
import { uploadRope } from '../../engine/rope-tables';
import { attention } from '../../engine/ops/attention';
import { contiguous } from '../../engine/ops/elementwise';
import { linear } from '../../engine/ops/linear';
import { layerNorm } from '../../engine/ops/norm';
import { rope } from '../../engine/ops/rope';
import { Checkpoint } from '../../engine/safetensors';
import type { Tensor } from '../../engine/tensor';
import { freeLinear, loadLinear, loadPlain, type ComputeDType, type LinearWeight, type WeightLoader } from '../common/weights';
import { parseQwen3VlVisionConfig, type Qwen3VlVisionConfig } from './config';
import { interpolatePositions, positionCorners, visionRotaryTable } from './positions';
import type { VisionInput } from './preprocess';

const EPS = 1e-6;

export interface Qwen3VlVisionLoadOptions {
  /** Compute dtype (default f16). */
  dtype?: ComputeDType;
  /** The blocks' and mergers' linear weights as weight-only int8 (the patch embedding stays 16-bit). */
  int8?: boolean;
  /** Key prefix (default "model.visual."). */
  prefix?: string;
}

export interface Qwen3VlVisionOutput {
  /** (tokens, out_hidden): the merged image tokens, images in order. */
  embeds: Tensor;
  /** One (tokens, out_hidden) per deepstack index, in config order. */
  deepstack: Tensor[];
  /** Merged tokens per image. */
  tokens: number[];
}

interface Norm {
  weight: Tensor;
  bias: Tensor;
}

interface Linear {
  weight: LinearWeight;
  bias: Tensor;
}

async function loadNorm(w: WeightLoader, p: string, n: number): Promise<Norm> {
  return { weight: await loadPlain(w, `${p}.weight`, [n]), bias: await loadPlain(w, `${p}.bias`, [n]) };
}

async function loadLin(w: WeightLoader, p: string, out: number, inp: number): Promise<Linear> {
  return { weight: await loadLinear(w, `${p}.weight`, [out, inp]), bias: await loadPlain(w, `${p}.bias`, [out]) };
}

function freeLin(l: Linear): void {
  freeLinear(l.weight);
  l.bias.free();
}

function norm(e: Engine, x: Tensor, n: Norm): Tensor {
  return layerNorm(e, x, { weight: n.weight, bias: n.bias, eps: EPS });
}

export class Qwen3VlVisionBlock {
  constructor(
    readonly norm1: Norm,
    readonly attn: { qkv: Linear; proj: Linear },
    readonly norm2: Norm,
    readonly mlp: { linear_fc1: Linear; linear_fc2: Linear },
  ) {}

  static async load(w: WeightLoader, cfg: Qwen3VlVisionConfig, p: string): Promise<Qwen3VlVisionBlock> {
    const { hiddenSize: h, intermediateSize: f } = cfg;
    return new Qwen3VlVisionBlock(
      await loadNorm(w, `${p}norm1`, h),
      { qkv: await loadLin(w, `${p}attn.qkv`, 3 * h, h), proj: await loadLin(w, `${p}attn.proj`, h, h) },
      await loadNorm(w, `${p}norm2`, h),
      { linear_fc1: await loadLin(w, `${p}mlp.linear_fc1`, f, h), linear_fc2: await loadLin(w, `${p}mlp.linear_fc2`, h, f) },
    );
  }

  /** x (P, hidden); cos/sin f32 (P, headDim / 2). Returns the new (P, hidden). */
  forward(e: Engine, cfg: Qwen3VlVisionConfig, x: Tensor, cos: Tensor, sin: Tensor): Tensor {
    const P = x.shape[0]!;
    const H = cfg.numHeads;
    const D = cfg.hiddenSize / H;
    // each step's input freed once its output exists (engine/scope.ts): the order of the hand-placed frees
    return e.chain(
      () => norm(e, x, this.norm1),
      (h1) => linear(e, h1, this.attn.qkv.weight, this.attn.qkv.bias), // (P, 3 * hidden) = [q | k | v] x heads
      (qkv) => {
        const parts = qkv.reshape([P, 3, H, D]).permute([1, 0, 2, 3]); // (3, P, H, D) view
        const q = rope(e, parts.slice(0, 0, 1), cos, sin); // (1, P, H, D); q, k and qkv freed once attention has read them
        const k = rope(e, parts.slice(0, 1, 2), cos, sin);
        const v = parts.slice(0, 2, 3);
        return attention(e, q.permute([0, 2, 1, 3]), k.permute([0, 2, 1, 3]), v.permute([0, 2, 1, 3]), { mask: 'none' }); // (1, H, P, D)
      },
      (att) => contiguous(e, att.permute([0, 2, 1, 3])), // (1, P, H, D)
      (merged) => linear(e, merged.reshape([P, H * D]), this.attn.proj.weight, this.attn.proj.bias, { residual: x }), // x1
      (x1) =>
        e.chain(
          () => norm(e, x1, this.norm2),
          (h2) => linear(e, h2, this.mlp.linear_fc1.weight, this.mlp.linear_fc1.bias, { act: cfg.hiddenAct }),
          (mid) => linear(e, mid, this.mlp.linear_fc2.weight, this.mlp.linear_fc2.bias, { residual: x1 }), // x2; x1 freed once it exists
        ),
    );
  }

  free(): void {
    for (const n of [this.norm1, this.norm2]) {
      n.weight.free();
      n.bias.free();
    }
    for (const l of [this.attn.qkv, this.attn.proj, this.mlp.linear_fc1, this.mlp.linear_fc2]) freeLin(l);
  }
}

/** Qwen3VLVisionPatchMerger: 2x2 patches -> one token of out_hidden; the norm before (per patch) or after the shuffle. */
export class Qwen3VlPatchMerger {
  constructor(
    readonly postShuffleNorm: boolean,
    readonly norm: Norm,
    readonly linear_fc1: Linear,
    readonly linear_fc2: Linear,
  ) {}

  static async load(w: WeightLoader, cfg: Qwen3VlVisionConfig, p: string, postShuffleNorm: boolean): Promise<Qwen3VlPatchMerger> {
    const wide = cfg.hiddenSize * cfg.spatialMergeSize ** 2;
    return new Qwen3VlPatchMerger(
      postShuffleNorm,
      await loadNorm(w, `${p}norm`, postShuffleNorm ? wide : cfg.hiddenSize),
      await loadLin(w, `${p}linear_fc1`, wide, wide),
      await loadLin(w, `${p}linear_fc2`, cfg.outHiddenSize, wide),
    );
  }

  /** x (P, hidden) in merge-block order -> (P / merge^2, out_hidden), a new tensor or written into `out` (any rows view). */
  forward(e: Engine, x: Tensor, out?: Tensor): Tensor {
    const wide = this.linear_fc1.bias.shape[0]!;
    const rows = x.numel / wide;
    return e.chain(
      () => (this.postShuffleNorm ? norm(e, x.reshape([rows, wide]), this.norm) : norm(e, x, this.norm).reshape([rows, wide])),
      (n) => linear(e, n, this.linear_fc1.weight, this.linear_fc1.bias, { act: 'gelu_erf' }),
      (mid) => linear(e, mid, this.linear_fc2.weight, this.linear_fc2.bias, { out }),
    );
  }

  free(): void {
    this.norm.weight.free();
    this.norm.bias.free();
    freeLin(this.linear_fc1);
    freeLin(this.linear_fc2);
  }
}

export class Qwen3VlVisionModel {
  private constructor(
    private readonly e: Engine,
    readonly config: Qwen3VlVisionConfig,
    readonly dtype: ComputeDType,
    /** Conv3d as a linear: weight (hidden, C*T*p*p), bias (hidden). */
    readonly patch_embed: { proj: Linear },
    /** The learned (numPositions, hidden) table, kept on the host in f32: it is only ever resampled (CPU). */
    readonly pos_embed: Float32Array,
    readonly blocks: Qwen3VlVisionBlock[],
    readonly merger: Qwen3VlPatchMerger,
    readonly deepstack_merger_list: Qwen3VlPatchMerger[],
  ) {}

  static async load(e: Engine, ckpt: Checkpoint, config: Qwen3VlVisionConfig, o: Qwen3VlVisionLoadOptions = {}): Promise<Qwen3VlVisionModel> {
    const dtype = o.dtype ?? 'f16';
    const p = o.prefix ?? config.keyPrefix;
    const w: WeightLoader = { e, ckpt, dtype, int8: !!o.int8, loaded: [] };
    const { hiddenSize: h, inChannels: C, temporalPatchSize: T, patchSize: ps } = config;
    const blocks: Qwen3VlVisionBlock[] = [];
    const freeAll = () => {
      for (const t of w.loaded) t.free();
    };
    try {
      const conv = await loadPlain(w, `${p}patch_embed.proj.weight`, [h, C, T, ps, ps]);
      const proj: Linear = { weight: conv.reshape([h, C * T * ps * ps]), bias: await loadPlain(w, `${p}patch_embed.proj.bias`, [h]) };
      ckpt.entry(`${p}pos_embed.weight`, [config.numPositionEmbeddings, h]);
      const pos = await ckpt.readFloat32(`${p}pos_embed.weight`);
      for (let i = 0; i < config.depth; i++) blocks.push(await Qwen3VlVisionBlock.load(w, config, `${p}blocks.${i}.`));
      const merger = await Qwen3VlPatchMerger.load(w, config, `${p}merger.`, false);
      const ds: Qwen3VlPatchMerger[] = [];
      for (let k = 0; k < config.deepstackVisualIndexes.length; k++) ds.push(await Qwen3VlPatchMerger.load(w, config, `${p}deepstack_merger_list.${k}.`, true));
      return new Qwen3VlVisionModel(e, config, dtype, { proj }, pos, blocks, merger, ds);
    } catch (err) {
      freeAll();
      throw err;
    }
  }

  /** `dir` holds the Qwen3-VL config.json and the weights (sharded or not). */
  static async fromDir(e: Engine, dir: string, o: Qwen3VlVisionLoadOptions = {}): Promise<Qwen3VlVisionModel> {
    const path = join(dir, 'config.json');
    const config = parseQwen3VlVisionConfig(JSON.parse(await readFile(path, 'utf8')), path);
    const ckpt = await Checkpoint.open(dir);
    try {
      return await Qwen3VlVisionModel.load(e, ckpt, config, o);
    } finally {
      await ckpt.close();
    }
  }

  /** Tower outputs for images in order (each from imagePatches); records the work, nothing waits. */
  forward(images: readonly VisionInput[]): Qwen3VlVisionOutput {
    const e = this.e;
    const cfg = this.config;
    const m = cfg.spatialMergeSize;
    if (images.length === 0) throw new RangeError('Qwen3VlVisionModel: no images');
    const tokens = images.map((im, i) => {
      const [t, gh, gw] = im.grid;
      const rowLen = cfg.inChannels * cfg.temporalPatchSize * cfg.patchSize ** 2;
      if (t !== 1 || gh % m || gw % m || im.patches.length !== t * gh * gw * rowLen) {
        throw new RangeError(`Qwen3VlVisionModel: image ${i}: grid [${im.grid}] with ${im.patches.length} values (rows of ${rowLen}, sides multiples of ${m})`);
      }
      return (gh * gw) / (m * m);
    });
    const total = tokens.reduce((a, b) => a + b, 0);
    const shape = [total, cfg.outHiddenSize];
    return e.scope(() => {
      // freed by the scope if an image throws
      const embeds = e.empty(shape, this.dtype, 'vision embeds');
      const deepstack = cfg.deepstackVisualIndexes.map((_, k) => e.empty(shape, this.dtype, `vision deepstack ${k}`));
      let at = 0;
      images.forEach((im, i) => {
        const rows = (dst: Tensor) => dst.slice(0, at, at + tokens[i]!);
        this.forwardOne(im, rows(embeds), deepstack.map(rows));
        at += tokens[i]!;
      });
      return { embeds, deepstack, tokens };
    }, 'vision tower');
  }

  /** One image through the tower, writing its merged tokens into `out` and each deepstack output into `ds[k]`. */
  private forwardOne(im: VisionInput, out: Tensor, ds: Tensor[]): void {
    const e = this.e;
    const cfg = this.config;
    const [, gh, gw] = im.grid;
    const P = gh * gw;
    const m = cfg.spatialMergeSize;
    const pos = interpolatePositions(this.pos_embed, cfg.hiddenSize, positionCorners(im.grid, m, cfg.numPositionEmbeddings));
    e.scope(() => {
      // the inputs and tables freed when the image is done; each block's input once its output exists
      const posT = e.upload(pos, [P, cfg.hiddenSize], this.dtype, 'vision pos');
      const patches = e.upload(im.patches, [P, im.patches.length / P], this.dtype, 'vision patches');
      const { cos, sin } = uploadRope(e, visionRotaryTable(im.grid, m, cfg.hiddenSize / cfg.numHeads));
      const x = e.chain(
        () => linear(e, patches, this.patch_embed.proj.weight, this.patch_embed.proj.bias, { residual: posT }),
        ...this.blocks.map((block, i) => (x: Tensor) => {
          const next = block.forward(e, cfg, x, cos, sin);
          const k = cfg.deepstackVisualIndexes.indexOf(i);
          // the mergers write straight into the image's rows of the outputs (linear honours an out view's offset)
          if (k >= 0) this.deepstack_merger_list[k]!.forward(e, next, ds[k]!);
          return next;
        }),
      );
      this.merger.forward(e, x, out);
    }, 'vision image');
  }

  free(): void {
    freeLin(this.patch_embed.proj);
    for (const b of this.blocks) b.free();
    this.merger.free();
    for (const d of this.deepstack_merger_list) d.free();
  }
}
