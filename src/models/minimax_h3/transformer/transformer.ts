// MiniMaxH3Transformer3DModel (diffusers) on the engine: one packed sequence [text | conditioning | audio | video]
// through the token refiner (text only), 50 AdaLN blocks with full self-attention, norm_out and the two heads.
// Fields mirror the checkpoint's keys (transformer/diffusion_pytorch_model.safetensors.index.json), so loading
// needs no mapping table:
//   proj_in (video patch 96 -> H), audio_proj_in (32 -> H), context_embedder (5120 -> H)      with biases
//   time_embedder.linear_1/linear_2, token_refiner.refiner_blocks.N.*, token_refiner.final_norm
//   transformer_blocks.N.* (blocks.ts), norm_out.norm.weight + norm_out.linear, proj_out, audio_proj_out
// Precision as upstream's mixed checkpoint: proj_in, audio_proj_in, time_embedder, proj_out and audio_proj_out
// are f32 (latents in and velocities out are f32); everything else runs in the compute dtype (bf16 in the
// checkpoint -> f16 or f32 on upload), its linears optionally int8 weight-only.
//
// Per job:  encodeText (context_embedder + refiner; the text never changes), prepare(packed) (RoPE tables, row
//           ids); per group of steps: adaln(timesteps) (tables for every block, sampler.ts); per forward: forward().
import type { Engine } from '../../../engine/engine';
import { cast, copyInto, gather, uploadIds } from '../../../engine/ops/layout';
import { rmsNorm } from '../../../engine/ops/norm';
import { uploadRope } from '../../../engine/rope-tables';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { Checkpoint } from '../../../engine/safetensors';
import { Tensor } from '../../../engine/tensor';
import { releaseToHost, type HostHeld } from '../../../engine/host-held';
import { loadPlain, type ComputeDType, type WeightLoader } from '../../common/weights';
import { computeAdaLN, type AdaLNTables, type TimeEmbedder } from './adaln';
import { applyLinear, freeLinearModule, H3RefinerBlock, H3TransformerBlock, loadLinearModule, type AdaLNProjection, type Linear, type RotaryTables } from './blocks';
import { videoPatchDim, type H3Config } from './config';
import { checkPackedSequence, MODALITIES, type PackedSequence } from '../sequence/packed-sequence';
import { RowModulation } from './modulation';
import { h3InvFreq, h3RopeTable } from './rope';
import { VIDEO_SHIFT, type H3StepCount } from '../sampler/sigmas';

/** The diffusers index name of transformer/ (Checkpoint.open(dir) looks for model.safetensors.index.json). */
export const DIFFUSERS_INDEX = 'diffusion_pytorch_model.safetensors.index.json';

/** Opens a diffusers transformer/ folder (sharded index or single file), or any path Checkpoint.open takes. */
export function openH3Checkpoint(path: string): Promise<Checkpoint> {
  for (const f of [DIFFUSERS_INDEX, 'diffusion_pytorch_model.safetensors']) if (existsSync(join(path, f))) return Checkpoint.open(join(path, f));
  return Checkpoint.open(path);
}

export interface H3LoadOptions {
  /** Compute dtype of the block stack (default f32). */
  dtype?: ComputeDType;
  /** Weight-only int8 for the block stack's, the refiner's, the AdaLN and the context linears. */
  int8?: boolean;
  /** Key prefix (fixtures: "weight."). */
  prefix?: string;
  /**
   * Where the blocks' adaln_proj.linear weights live (after quantisation): 'host' (default) keeps them in host
   * memory and adaln() streams them through one block-sized GPU buffer (adaln.ts): in the released model they are
   * 13B parameters only the AdaLN tables read. 'gpu' keeps them resident (faster tables, 13-26 GB more GPU memory).
   */
  adalnWeights?: 'host' | 'gpu';
  /**
   * Where the transformer blocks' weights go as they load: 'gpu' (default), or 'host': each block is read onto the GPU
   * alone and moved to host memory at once (the copy kept for block offload, offloadBlocks), so the whole DiT is never
   * on the GPU. A function decides once the first block is loaded, from its pool bytes (the residency policy).
   */
  blocks?: 'gpu' | 'host' | H3BlockPlacement;
}

/** Decides where the blocks go from the first one's GPU bytes (pool size classes) and their count. */
export type H3BlockPlacement = (first: { blockBytes: number; blocks: number; config: H3Config }) => 'gpu' | 'host';

/** The GPU state of a job's packed sequence: RoPE tables and stream row ids. */
export interface H3Sequence {
  packed: PackedSequence;
  rot: RotaryTables;
  videoIds: Tensor;
  audioIds: Tensor;
  free(): void;
}

export interface H3ForwardInput {
  /** Video rows [Nv, patch] f32 in packed.videoIndices order (conditioning rows first). */
  video: Tensor;
  /** Audio rows [Na, audio channels] f32 in packed.audioIndices order (channel-major). */
  audio: Tensor;
  /** encodeText's result [1, Nt, H]. */
  text: Tensor;
  sequence: H3Sequence;
  /** adaln()'s tables for this step. */
  adaln: AdaLNTables;
  /** Per sequence row: index into adaln.timesteps. */
  timestepIndices: ArrayLike<number>;
  /** Tests: the per-row norm path even with few runs. */
  perRowModulation?: boolean;
  /** Intermediates for tests ("packed", "block.N", "norm_out"); each tensor is freed after the call returns. */
  capture?: (name: string, t: Tensor) => void;
}

export interface H3ForwardOutput {
  /** Velocity of every video row [Nv, patch] f32, conditioning rows included (the sampler skips them). */
  video: Tensor;
  /** Velocity of every audio row [Na, audio channels] f32. */
  audio: Tensor;
}

export class MiniMaxH3Transformer {
  /** What a job's `steps` counts for these weights (sigmas.ts H3StepCount): the base release's grid points unless the
   * loader says the weights are distilled (profiles.ts loadH3Transformer sets it from the profile). */
  stepCount: H3StepCount = 'grid-points';
  /** The video schedule's shift these weights sample at (sigmas.ts; the Ref2VA adapters name their own). */
  videoShift: number = VIDEO_SHIFT;
  /** Every GPU tensor the weights hold (what load() loaded), for moving them to host memory and back (host-held.ts). */
  private tensors: Tensor[] = [];
  /** Each transformer block's GPU tensors (among `tensors`). */
  private blockTensors: Tensor[][] = [];
  /** Block offload (offloadBlocks): every block's weights in host memory, uploaded in turn for each use. */
  private stream: BlockStream | null = null;
  /** The host copies of blocks made resident again (residentBlocks), for a later offloadBlocks without a readback. */
  private parked: BlockStream | null = null;

  private constructor(
    readonly e: Engine,
    readonly config: H3Config,
    readonly dtype: ComputeDType,
    readonly proj_in: Linear,
    readonly audio_proj_in: Linear,
    readonly context_embedder: Linear,
    readonly time_embedder: TimeEmbedder,
    readonly token_refiner: { refiner_blocks: H3RefinerBlock[]; final_norm: Tensor },
    readonly transformer_blocks: H3TransformerBlock<AdaLNProjection>[],
    readonly norm_out: { norm: Tensor; linear: Linear },
    readonly proj_out: Linear,
    readonly audio_proj_out: Linear,
    /** rope.inv_freq: computed (diffusers does not store it), float32. */
    readonly invFreq: Float32Array,
  ) {}

  static async load(e: Engine, ckpt: Checkpoint, config: H3Config, opts: H3LoadOptions = {}): Promise<MiniMaxH3Transformer> {
    if (config.format !== 'diffusers') {
      throw new RangeError(`MiniMaxH3Transformer: the ${config.format} checkpoint format (fused qkv_proj) is read through openH3Weights / loadH3Transformer (native-checkpoint.ts), which present it under the diffusers names`);
    }
    const dtype = opts.dtype ?? 'f32';
    const w: WeightLoader = { e, ckpt, dtype, int8: !!opts.int8, loaded: [] };
    const f32: WeightLoader = { ...w, dtype: 'f32', int8: false }; // shares w.loaded
    const p = opts.prefix ?? '';
    const c = config;
    const H = c.hiddenSize;
    /** The blocks' host copies where they load to the host. */
    const held: HostHeld[] = [];
    try {
      const proj_in = await loadLinearModule(f32, `${p}proj_in.`, H, videoPatchDim(c), true);
      const audio_proj_in = await loadLinearModule(f32, `${p}audio_proj_in.`, H, c.audioInChannels, true);
      const context_embedder = await loadLinearModule(w, `${p}context_embedder.`, H, c.textDim, true);
      const time_embedder = {
        linear_1: await loadLinearModule(f32, `${p}time_embedder.linear_1.`, c.timeEmbedHiddenDim, c.freqDim, true),
        linear_2: await loadLinearModule(f32, `${p}time_embedder.linear_2.`, c.timeEmbedDim, c.timeEmbedHiddenDim, true),
      };
      const refiner_blocks: H3RefinerBlock[] = [];
      for (let i = 0; i < c.numRefinerLayers; i++) refiner_blocks.push(await H3RefinerBlock.load(w, c, `${p}token_refiner.refiner_blocks.${i}.`));
      const final_norm = await loadPlain(w, `${p}token_refiner.final_norm.weight`, [H]);
      const blocks: H3TransformerBlock<AdaLNProjection>[] = [];
      const adalnOnHost = (opts.adalnWeights ?? 'host') === 'host';
      const blockTensors: Tensor[][] = [];
      let place = typeof opts.blocks === 'string' ? opts.blocks : 'gpu';
      for (let i = 0; i < c.numLayers; i++) {
        const first = w.loaded.length;
        blocks.push(await H3TransformerBlock.load(w, c, `${p}transformer_blocks.${i}.`, { adalnOnHost }));
        const ts = w.loaded.slice(first).filter((t): t is Tensor => t instanceof Tensor);
        blockTensors.push(ts);
        if (i === 0 && typeof opts.blocks === 'function') {
          const blockBytes = [...new Set(ts.map((t) => t.storage))].reduce((a, s) => a + s.pooled.size, 0);
          place = opts.blocks({ blockBytes, blocks: c.numLayers, config: c });
        }
        // the block's bytes to the host before the next one loads: one block on the GPU at a time
        if (place === 'host') held.push(await releaseToHost(e, ts, { keep: true }));
      }
      const norm_out = {
        norm: await loadPlain(w, `${p}norm_out.norm.weight`, [H]),
        linear: await loadLinearModule(w, `${p}norm_out.linear.`, 2 * H, c.timeEmbedDim, true),
      };
      const proj_out = await loadLinearModule(f32, `${p}proj_out.`, videoPatchDim(c), H, true);
      const audio_proj_out = await loadLinearModule(f32, `${p}audio_proj_out.`, c.audioInChannels, H, true);
      const model = new MiniMaxH3Transformer(e, c, dtype, proj_in, audio_proj_in, context_embedder, time_embedder, { refiner_blocks, final_norm }, blocks, norm_out, proj_out, audio_proj_out, h3InvFreq(c.ropeFreqDim, c.ropeTheta));
      model.tensors = w.loaded.filter((t): t is Tensor => t instanceof Tensor);
      model.blockTensors = blockTensors;
      if (held.length) model.stream = { held, prefetch: 1 };
      return model;
    } catch (err) {
      for (const t of w.loaded) t.free();
      throw err;
    }
  }

  /** The GPU tensors of the weights (host-kept adaln_proj weights are not among them). */
  weightTensors(): readonly Tensor[] {
    return this.tensors;
  }

  /**
   * Block offload (ComfyUI's and Wan2GP's block swap): every transformer block's weights move to host memory (read
   * back once, the copy kept), and each use uploads the block into pool buffers of its sizes and gives them back after
   * it; `prefetch` blocks ahead are uploaded before a block's work is recorded (WebGPU has one queue, so the uploads
   * are ordered with the work rather than overlapping it: `prefetch` 1 keeps two blocks on the GPU). The outputs are
   * the same: the same bytes, the same kernels.
   */
  async offloadBlocks(prefetch = 1): Promise<void> {
    if (this.stream) return;
    const parked = this.parked;
    if (parked) {
      // the host copies kept from before (residentBlocks): the buffers go back without a readback
      for (const h of parked.held) h.evict();
      this.parked = null;
      this.stream = parked;
      return;
    }
    const held: HostHeld[] = [];
    try {
      for (const ts of this.blockTensors) held.push(await releaseToHost(this.e, ts, { keep: true }));
    } catch (err) {
      for (const h of held) h.restore();
      throw err;
    }
    this.stream = { held, prefetch: Math.max(0, Math.floor(prefetch)) };
  }

  /** Every block resident again (a job that fits without block offload); the host copies are kept for the next
   * offloadBlocks(). */
  residentBlocks(): void {
    const s = this.stream;
    if (!s) return;
    for (const h of s.held) h.restore();
    this.stream = null;
    this.parked = s;
  }

  /** What block offload streams: null when the blocks are resident. hostBytes: all blocks' bytes in host memory, each
   * forward (and each AdaLN table build) uploads them once; gpuBytes: their pool bytes when resident; uploadedBytes:
   * uploads so far. */
  get blockOffload(): { blocks: number; prefetch: number; hostBytes: number; gpuBytes: number; uploadedBytes: number } | null {
    const s = this.stream;
    if (!s) return null;
    const sum = (f: (h: HostHeld) => number) => s.held.reduce((a, h) => a + f(h), 0);
    return { blocks: s.held.length, prefetch: s.prefetch, hostBytes: sum((h) => h.bytes), gpuBytes: sum((h) => h.gpuBytes), uploadedBytes: sum((h) => h.uploadedBytes) };
  }

  /** Block n's weights on the GPU (and `prefetch` more after it) while `fn` records its work, given back after. */
  private withBlock<T>(n: number, fn: () => T): T {
    const s = this.stream;
    if (!s) return fn();
    for (let k = n; k <= Math.min(n + s.prefetch, s.held.length - 1); k++) s.held[k]!.restore();
    try {
      return fn();
    } finally {
      s.held[n]!.evict();
    }
  }

  /** context_embedder + token refiner: encoder hidden states [1, Nt, text_dim] (f32 or compute dtype) -> [1, Nt, H]. */
  encodeText(text: Tensor): Tensor {
    const { e, config: c } = this;
    if (text.rank !== 3 || text.shape[0] !== 1 || text.shape[2] !== c.textDim) throw new RangeError(`encodeText: text ${text} must be [1, Nt, ${c.textDim}]`);
    // each step's input freed once its output exists (a cast copy of the text included; the text is the caller's)
    return e.chain(
      () => applyLinear(e, this.context_embedder, text.dtype === this.dtype ? text : cast(e, text, this.dtype)),
      ...this.token_refiner.refiner_blocks.map((b) => (h: Tensor) => b.forward(e, c, h)),
      (h) => rmsNorm(e, h, { weight: this.token_refiner.final_norm, eps: c.finalNormEps }),
    );
  }

  /** Uploads what a packed sequence needs for every step: RoPE tables and the video / audio row ids. */
  prepare(packed: PackedSequence): H3Sequence {
    checkPackedSequence(packed);
    const rot = uploadRope(this.e, h3RopeTable(packed.positions, this.invFreq));
    const videoIds = uploadIds(this.e, packed.videoIndices);
    const audioIds = uploadIds(this.e, packed.audioIndices);
    return {
      packed,
      rot,
      videoIds,
      audioIds,
      free() {
        rot.cos.free();
        rot.sin.free();
        videoIds.free();
        audioIds.free();
      },
    };
  }

  /** AdaLN tables of every block and of norm_out for distinct timesteps (the sampler asks once per group of steps;
   * host-kept adaln_proj weights are streamed to the GPU by every call). */
  adaln(timesteps: ArrayLike<number>): AdaLNTables {
    return computeAdaLN(this.e, this.config, this, timesteps, this.dtype, (n, fn) => this.withBlock(n, fn));
  }

  forward(inp: H3ForwardInput): H3ForwardOutput {
    const { e, config: c } = this;
    const seq = inp.sequence.packed;
    const L = seq.length;
    const H = c.hiddenSize;
    const expect = (name: string, t: Tensor, shape: number[], dtype?: string) => {
      if (t.rank !== shape.length || t.shape.some((n, i) => n !== shape[i]) || (dtype && t.dtype !== dtype)) {
        throw new RangeError(`MiniMaxH3Transformer.forward: ${name} ${t} must be ${dtype ?? ''}[${shape}]`);
      }
    };
    expect('video', inp.video, [seq.videoIndices.length, videoPatchDim(c)], 'f32');
    expect('audio', inp.audio, [seq.audioIndices.length, c.audioInChannels], 'f32');
    expect('text', inp.text, [1, seq.textIndices.length, H], this.dtype);
    if (inp.timestepIndices.length !== L) throw new RangeError(`MiniMaxH3Transformer.forward: ${inp.timestepIndices.length} timestep indices for ${L} rows`);
    const T = inp.adaln.timesteps.length;

    const adalnRows = new Int32Array(L);
    for (let i = 0; i < L; i++) {
      const t = inp.timestepIndices[i]!;
      if (!(t >= 0 && t < T)) throw new RangeError(`MiniMaxH3Transformer.forward: row ${i} has timestep index ${t} of ${T}`);
      adalnRows[i] = t * MODALITIES + seq.tags[i]!;
    }
    // a test's capture runs outside the scopes: the copies it makes are its own
    const capture = inp.capture && ((name: string, t: Tensor) => e.unscoped(() => inp.capture!(name, t)));
    // one chain: each step's input freed once its output exists, as the hand-placed frees did
    return e.scope(() => {
      const normed = e.chain(
        () =>
          e.scope(() => {
            // the row -> AdaLN row ids (timestep index * 3 + modality tag), shared by every block: freed with the stack
            const mod = RowModulation.create(e, adalnRows, { perRow: inp.perRowModulation });
            return e.chain(
              () => this.pack(inp, capture),
              ...this.transformer_blocks.map((b, n) => (x: Tensor) => {
                const next = this.withBlock(n, () => b.forward(e, c, x, inp.adaln.blocks[n]!, { rot: inp.sequence.rot, mod }));
                capture?.(`block.${n}`, next);
                return next;
              }),
            );
          }),
        // norm_out (shift/scale per timestep); its row ids freed with the norm's scope
        (x) => e.scope(() => RowModulation.create(e, inp.timestepIndices, { perRow: inp.perRowModulation }).norm(e, x, inp.adaln.normOut, 0, 1, { weight: this.norm_out.norm, eps: c.finalNormEps })),
      );
      capture?.('norm_out', normed);
      // each head on its own rows only; normed freed once both exist
      const head = (m: Linear, ids: Tensor): Tensor =>
        e.chain(
          () => gather(e, normed.reshape([L, H]), ids),
          (rows) => (this.dtype === 'f32' ? rows : cast(e, rows, 'f32')),
          (r32) => applyLinear(e, m, r32),
        );
      return { video: head(this.proj_out, inp.sequence.videoIds), audio: head(this.audio_proj_out, inp.sequence.audioIds) };
    });
  }

  /** The input streams projected and scattered into the packed sequence [1, L, H] (the text as it is, video and
   * audio through proj_in / audio_proj_in, cast to the compute dtype). */
  private pack(inp: H3ForwardInput, capture: ((name: string, t: Tensor) => void) | undefined): Tensor {
    const { e, config: c } = this;
    const seq = inp.sequence.packed;
    const H = c.hiddenSize;
    const packed = e.empty([1, seq.length, H], this.dtype, 'h3 packed');
    scatterRows(e, inp.text.reshape([seq.textIndices.length, H]), seq.textIndices, packed);
    for (const [m, rows, idx] of [[this.proj_in, inp.video, seq.videoIndices], [this.audio_proj_in, inp.audio, seq.audioIndices]] as const) {
      // the projection (and its cast) freed once scattered
      e.scope(() => {
        const y = applyLinear(e, m, rows);
        scatterRows(e, this.dtype === 'f32' ? y : cast(e, y, this.dtype), idx, packed);
      });
    }
    capture?.('packed', packed);
    return packed;
  }

  free(): void {
    for (const m of [this.proj_in, this.audio_proj_in, this.context_embedder, this.time_embedder.linear_1, this.time_embedder.linear_2, this.norm_out.linear, this.proj_out, this.audio_proj_out]) {
      freeLinearModule(m);
    }
    for (const b of this.token_refiner.refiner_blocks) b.free();
    this.token_refiner.final_norm.free();
    for (const b of this.transformer_blocks) b.free();
    this.norm_out.norm.free();
  }
}

/** Block offload's state: one host copy per block. */
interface BlockStream {
  held: HostHeld[];
  prefetch: number;
}

/** packed[0, idx[i]] = rows[i]: one copy per run of consecutive sequence rows. */
function scatterRows(e: Engine, rows: Tensor, idx: ArrayLike<number>, packed: Tensor): void {
  let i = 0;
  while (i < idx.length) {
    let j = i + 1;
    while (j < idx.length && idx[j] === idx[j - 1]! + 1) j++;
    copyInto(e, rows.slice(0, i, j), packed.slice(1, idx[i]!, idx[i]! + (j - i)).reshape([j - i, rows.shape[1]!]));
    i = j;
  }
}
