// Residual vector quantisers of the 12 Hz codec, on channels-last rows (T, dim).
//   SplitRvqDecoder  upstream SplitResidualVectorQuantizer.decode (keys "decoder.quantizer."): codebook 0 through
//                    rvq_first, codebooks 1.. through rvq_rest; per group the codebook vectors of each frame are
//                    summed, then the group's output_proj (Conv1d k1, no bias, dim -> codebook_dim); groups added.
//                    (The decoder's input_proj weights exist in the checkpoint but decode never uses them.)
//   MimiRvqEncoder   transformers' MimiSplitResidualVectorQuantizer.encode (keys "encoder.quantizer."): the
//                    semantic and the acoustic RVQ each project the *same* embeddings with their own input_proj,
//                    then per layer pick the nearest codebook vector (Euclidean) and subtract it from the residual.
// Codebook vectors = embedding_sum / max(cluster_usage, 1e-5) (EuclideanCodebook), computed at load in float64.
import type { Engine } from '../../../engine/engine';
import { sub } from '../../../engine/ops/elementwise';
import { gather } from '../../../engine/ops/layout';
import { linear } from '../../../engine/ops/linear';
import { argmax, sum } from '../../../engine/ops/reduce';
import type { Tensor } from '../../../engine/tensor';
import { uploadTracked, type WeightLoader } from '../../common/weights';
import { codebookVectors, loadPointwise } from './weights';

/** ResidualVectorQuantizer (decode side): the stacked codebooks of its layers and output_proj. */
export class RvqGroupDecoder {
  constructor(
    readonly layers: number,
    readonly codebookSize: number,
    /** vq.layers.{i}._codebook vectors stacked: [layers * codebookSize, dim] (row i * size + code). */
    readonly codebooks: Tensor,
    /** output_proj.weight [codebook_dim, dim] (the Conv1d k1 as a linear weight). */
    readonly output_proj: Tensor,
  ) {}

  static async load(w: WeightLoader, p: string, layers: number, size: number, dim: number, outDim: number): Promise<RvqGroupDecoder> {
    const all = new Float64Array(layers * size * dim);
    for (let i = 0; i < layers; i++) {
      const cb = `${p}vq.layers.${i}._codebook.`;
      all.set(await codebookVectors(w, `${cb}embedding_sum`, `${cb}cluster_usage`, size, dim), i * size * dim);
    }
    const codebooks = uploadTracked(w, all, [layers * size, dim], `${p}codebooks`);
    return new RvqGroupDecoder(layers, size, codebooks, await loadPointwise(w, `${p}output_proj.weight`, outDim, dim));
  }

  /** codes[t * stride + first + i] for layer i of frame t -> (T, codebook_dim) = output_proj(sum_i codebook_i[code]);
   * `residual` (T, codebook_dim) is added in the epilogue. */
  decode(e: Engine, codes: ArrayLike<number>, frames: number, stride: number, first: number, residual?: Tensor): Tensor {
    const n = this.layers;
    const ids = new Int32Array(frames * n);
    for (let t = 0; t < frames; t++) {
      for (let i = 0; i < n; i++) ids[t * n + i] = i * this.codebookSize + codes[t * stride + first + i]!;
    }
    return e.chain(
      () => gather(e, this.codebooks, ids), // (T * n, dim)
      (rows) => (n === 1 ? rows : sum(e, rows.reshape([frames, n, rows.shape[1]!]).permute([0, 2, 1]))), // (T, dim)
      (summed) => linear(e, summed, this.output_proj, null, { residual }),
    );
  }

  free(): void {
    this.codebooks.free();
    this.output_proj.free();
  }
}

export interface SplitRvqShape {
  numQuantizers: number;
  codebookSize: number;
  /** Output width (the decoder's codebook_dim); codebook vectors are codebookDim / 2 wide. */
  codebookDim: number;
}

export class SplitRvqDecoder {
  constructor(
    readonly shape: SplitRvqShape,
    readonly rvq_first: RvqGroupDecoder,
    readonly rvq_rest: RvqGroupDecoder,
  ) {}

  /** `p`: "decoder.quantizer.". One semantic codebook (upstream hard-codes n_q_semantic = 1). */
  static async load(w: WeightLoader, s: SplitRvqShape, p: string): Promise<SplitRvqDecoder> {
    const dim = s.codebookDim / 2;
    return new SplitRvqDecoder(
      s,
      await RvqGroupDecoder.load(w, `${p}rvq_first.`, 1, s.codebookSize, dim, s.codebookDim),
      await RvqGroupDecoder.load(w, `${p}rvq_rest.`, s.numQuantizers - 1, s.codebookSize, dim, s.codebookDim),
    );
  }

  /** codes (T, numQuantizers) row-major, each in [0, codebookSize) -> (T, codebookDim). */
  decode(e: Engine, codes: ArrayLike<number>, frames: number): Tensor {
    const { numQuantizers: nq, codebookSize: size } = this.shape;
    if (codes.length !== frames * nq) throw new RangeError(`codec rvq: ${codes.length} codes for ${frames} frames x ${nq} codebooks`);
    for (let i = 0; i < codes.length; i++) {
      const c = codes[i]!;
      if (!Number.isInteger(c) || c < 0 || c >= size) {
        throw new RangeError(`codec rvq: code ${c} (frame ${Math.floor(i / nq)}, codebook ${i % nq}) is not in 0..${size - 1}`);
      }
    }
    return e.chain(
      () => this.rvq_first.decode(e, codes, frames, nq, 0),
      (first) => this.rvq_rest.decode(e, codes, frames, nq, 1, first),
    );
  }

  free(): void {
    this.rvq_first.free();
    this.rvq_rest.free();
  }
}

/** One MimiVectorQuantization layer: its codebook and -|c|^2 / 2 per code (nearest = argmax of x.c - |c|^2 / 2). */
interface MimiCodebook {
  embed: Tensor;
  halfNegNorm: Tensor;
}

/** MimiResidualVectorQuantizer (encode side). */
export class MimiRvqEncoder {
  constructor(
    /** input_proj.weight [vq_dim, hidden] (Conv1d k1, no bias). */
    readonly input_proj: Tensor,
    readonly layers: MimiCodebook[],
  ) {}

  /** `p`: "encoder.quantizer.semantic_residual_vector_quantizer." or the acoustic one; loads the first `n` layers. */
  static async load(w: WeightLoader, p: string, n: number, hidden: number, size: number, dim: number): Promise<MimiRvqEncoder> {
    const input_proj = await loadPointwise(w, `${p}input_proj.weight`, dim, hidden);
    const layers: MimiCodebook[] = [];
    for (let i = 0; i < n; i++) {
      const cb = `${p}layers.${i}.codebook.`;
      const v = await codebookVectors(w, `${cb}embed_sum`, `${cb}cluster_usage`, size, dim);
      const bias = new Float64Array(size);
      for (let c = 0; c < size; c++) {
        let s = 0;
        for (let d = 0; d < dim; d++) s += v[c * dim + d]! ** 2;
        bias[c] = -s / 2;
      }
      layers.push({ embed: uploadTracked(w, v, [size, dim], `${cb}embed`), halfNegNorm: uploadTracked(w, bias, [size], `${cb}bias`) });
    }
    return new MimiRvqEncoder(input_proj, layers);
  }

  /** x (T, hidden) -> codes [layer][t] of the first `n` layers (one readback per layer: the next residual needs the ids). */
  async encode(e: Engine, x: Tensor, n = this.layers.length): Promise<Int32Array[]> {
    let residual = linear(e, x, this.input_proj); // (T, dim)
    const out: Int32Array[] = [];
    try {
      for (let i = 0; i < n; i++) {
        const { embed, halfNegNorm } = this.layers[i]!;
        // the scores go once argmax has read them, the argmax once read back (a scope whose one await is that read)
        const ids = await e.scope(async () => {
          const best = e.chain(() => linear(e, residual, embed, halfNegNorm), (score) => argmax(e, score)); // score (T, V): x.c - |c|^2/2 = (|x|^2 - |x - c|^2) / 2
          return Int32Array.from(await e.read(best));
        });
        out.push(ids);
        if (i + 1 < n) {
          const next = e.scope(() => sub(e, residual, gather(e, embed, ids))); // the gathered codes freed once subtracted
          residual.free();
          residual = next;
        }
      }
    } finally {
      residual.free();
    }
    return out;
  }

  free(): void {
    this.input_proj.free();
    for (const l of this.layers) {
      l.embed.free();
      l.halfNegNorm.free();
    }
  }
}
