// The second checkpoint format: MiniMax's native MiniMaxH3DiTModel keys (FL2VA/ and Ref2VA/transformer/, 535 tensors,
// and the single-file int8 builds that keep those names), presented under the diffusers names the transformer's
// fields use, so MiniMaxH3Transformer.load reads either format. The mapping (diffusers'
// scripts/convert_minimax_h3_to_diffusers.py, read at 97a1477b) is renames plus three transforms:
//   blocks.N.attn.qkv_proj [3 * heads * d, H]                                   -> to_q / to_k / to_v [heads * d, H]
//     rows per head [q(d) k(d) v(d)] in MiniMax's raw shards ('interleaved'); [q_all; k_all; v_all] ('stacked') in the
//     reference model's state dict and, by all reports, in ComfyUI repackaged files (diffusion_model. prefix). The row
//     order cannot be told from the tensors, so it follows the source (QkvRows) and can be forced.
//   *.mlp.fc1 [2F, H] stored [gate; value]                                      -> ff.net.0.proj [value; gate]
//   rope.inv_freq (16 f32)                                                      -> not loaded; checked against ours
// Int8 builds: a weight stored as I8 with a `<name>_scale` / `<name>.scale` / `<module>.weight_scale` tensor (one
// scale, or one per output row) is dequantised to float32 here; the loader re-quantises per output channel for the
// int8 profiles. Tensors this mapping does not know (rotation matrices of ConvRot builds, curve-form AdaLN tables) make
// the file refused, naming them, instead of being silently ignored.
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { Checkpoint, CheckpointError, type TensorEntry } from '../../../engine/safetensors';
import type { SourceIdentity } from '../../../engine/source-identity';
import { numelOf } from '../../../engine/tensor';
import { parseH3Config, type H3CheckpointFormat, type H3Config } from './config';
import { h3InvFreq } from './rope';
import { openH3Checkpoint } from './transformer';

/** The members of Checkpoint the weight loaders use (loadTensor, loadLinear; the int8 cache's sourceIdentity). */
export type CheckpointLike = Pick<Checkpoint, 'path' | 'has' | 'keys' | 'entry' | 'readChunks' | 'readFloat32'> & Partial<Pick<Checkpoint, 'sourceIdentity'>>;

/**
 * How a presented tensor is made: another name in the inner checkpoint, or float32 values computed on demand.
 * `what`: everything the computed values depend on (the inner tensors' identities and the transform), for the int8
 * cache (engine/int8-cache.ts); absent or null: the tensor is quantised afresh at every load.
 */
export type Recipe = { alias: string } | { shape: number[]; compute: () => Promise<Float32Array>; what?: () => Promise<string | null> };

/**
 * A checkpoint under other names: each presented key is an alias of an inner tensor (streamed as stored, no copy)
 * or computed float32 values. With `passThrough`, keys without a recipe are the inner checkpoint's own.
 */
export class KeyView implements CheckpointLike {
  constructor(
    readonly path: string,
    private readonly inner: CheckpointLike,
    private readonly recipes: Map<string, Recipe>,
    private readonly passThrough: boolean,
  ) {}

  has(name: string): boolean {
    return this.recipes.has(name) || (this.passThrough && this.inner.has(name));
  }

  keys(): string[] {
    const own = [...this.recipes.keys()];
    return this.passThrough ? [...new Set([...this.inner.keys(), ...own])] : own;
  }

  entry(name: string, shape?: readonly number[]): TensorEntry {
    const r = this.recipes.get(name);
    if (!r) {
      if (this.passThrough && this.inner.has(name)) return this.inner.entry(name, shape);
      throw new CheckpointError(`${this.path}: no tensor "${name}" in this view`);
    }
    if ('alias' in r) return { ...this.inner.entry(r.alias, shape), name };
    if (shape && (shape.length !== r.shape.length || shape.some((n, i) => n !== r.shape[i]))) {
      throw new CheckpointError(`${this.path}: tensor "${name}" is [${r.shape}], expected shape [${shape}]`);
    }
    return { name, dtype: 'F32', shape: r.shape, file: this.path, start: 0, byteLength: numelOf(r.shape) * 4 };
  }

  async readChunks(name: string, chunkBytes: number, onChunk: (bytes: Uint8Array, byteOffset: number) => void | Promise<void>): Promise<void> {
    const r = this.recipes.get(name);
    if (!r) {
      if (this.passThrough && this.inner.has(name)) return this.inner.readChunks(name, chunkBytes, onChunk);
      throw new CheckpointError(`${this.path}: no tensor "${name}" in this view`);
    }
    if ('alias' in r) return this.inner.readChunks(r.alias, chunkBytes, onChunk);
    const bytes = new Uint8Array((await this.computed(name, r)).buffer);
    const step = Math.max(4, Math.floor(chunkBytes / 4) * 4);
    for (let off = 0; off < bytes.byteLength; off += step) await onChunk(bytes.subarray(off, Math.min(off + step, bytes.byteLength)), off);
  }

  /** The inner tensor's identity (an alias, a passed-through key), or the recipe's (a computed one). */
  async sourceIdentity(name: string): Promise<SourceIdentity | null> {
    const r = this.recipes.get(name);
    if (!r) return this.passThrough && this.inner.has(name) ? ((await this.inner.sourceIdentity?.(name)) ?? null) : null;
    if ('alias' in r) return (await this.inner.sourceIdentity?.(r.alias)) ?? null;
    const what = await r.what?.();
    return what ? { where: `${this.path}#${name}`, what } : null;
  }

  async readFloat32(name: string): Promise<Float32Array> {
    const r = this.recipes.get(name);
    if (!r) {
      if (this.passThrough && this.inner.has(name)) return this.inner.readFloat32(name);
      throw new CheckpointError(`${this.path}: no tensor "${name}" in this view`);
    }
    return 'alias' in r ? this.inner.readFloat32(r.alias) : this.computed(name, r);
  }

  private async computed(name: string, r: { shape: number[]; compute: () => Promise<Float32Array> }): Promise<Float32Array> {
    const v = await r.compute();
    if (v.length !== numelOf(r.shape)) throw new CheckpointError(`${this.path}: "${name}" computed ${v.length} values for [${r.shape}]`);
    return v;
  }

  /** For MiniMaxH3Transformer.load: Checkpoint's constructor is private, and the loaders use only CheckpointLike. */
  asCheckpoint(): Checkpoint {
    return this as unknown as Checkpoint;
  }
}

/** Transformer weights in either format, presented under diffusers names. */
export interface H3WeightSource {
  path: string;
  format: H3CheckpointFormat;
  /** The config beside the weights (config.json), if any. */
  config: H3Config | null;
  /** Prefix of the presented keys (pass to MiniMaxH3Transformer.load). */
  prefix: string;
  view: CheckpointLike;
  checkpoint(): Checkpoint;
  close(): Promise<void>;
}

/** Row order of a fused qkv_proj (see the header). */
export type QkvRows = 'interleaved' | 'stacked';

/** Native key prefixes seen in single-file builds (ComfyUI saves the DiT under diffusion_model.). */
const NATIVE_PREFIXES = ['', 'diffusion_model.', 'model.diffusion_model.'];

function readJsonConfig(dir: string): H3Config | null {
  const f = join(dir, 'config.json');
  return existsSync(f) ? parseH3Config(JSON.parse(readFileSync(f, 'utf8')), f) : null;
}

/**
 * Opens transformer weights: a diffusers transformer/ folder, a native folder (config.json + model.safetensors.index.json),
 * or one .safetensors file in either naming. `config` is needed for the native format when no config.json is beside it.
 */
export async function openH3Weights(path: string, opts: { prefix?: string; config?: H3Config; qkvRows?: QkvRows } = {}): Promise<H3WeightSource> {
  const isDir = existsSync(path) && statSync(path).isDirectory();
  const fileConfig = isDir ? readJsonConfig(path) : null;
  const ckpt = isDir && fileConfig?.format === 'native' ? await Checkpoint.open(path) : await openH3Checkpoint(path);
  try {
    const given = opts.prefix ?? '';
    const nativePrefix = NATIVE_PREFIXES.map((p) => given + p).find((p) => ckpt.has(`${p}blocks.0.attn.qkv_proj.weight`) || ckpt.has(`${p}token_refiner.blocks.0.attn.qkv_proj.weight`));
    if (nativePrefix === undefined) {
      return { path, format: 'diffusers', config: fileConfig, prefix: given, view: ckpt, checkpoint: () => ckpt, close: () => ckpt.close() };
    }
    const config = fileConfig ?? opts.config ?? null;
    if (!config) throw new CheckpointError(`${path}: native-format weights without config.json: pass the config (the released one is RELEASED_H3_CONFIG)`);
    // raw MiniMax shards (a folder, or a bare file) interleave; ComfyUI-keyed single files are stacked
    const qkvRows = opts.qkvRows ?? (nativePrefix === given ? 'interleaved' : 'stacked');
    const view = nativeView(ckpt, config, nativePrefix, given, qkvRows);
    return { path, format: 'native', config: fileConfig, prefix: given, view, checkpoint: () => view.asCheckpoint(), close: () => ckpt.close() };
  } catch (err) {
    await ckpt.close();
    throw err;
  }
}

/** The released DiT's hyper-parameters (FL2VA/transformer/config.json), for single-file builds that carry none. */
export const RELEASED_H3_CONFIG: H3Config = parseH3Config(
  {
    _class_name: 'MiniMaxH3DiTModel', hidden_size: 5376, num_layers: 50, token_refiner_num_layers: 2, num_attention_heads: 56,
    attention_head_dim: 128, ffn_hidden_size: 14336, latents_dim: 24, audio_latents_dim: 32, patch_size: [1, 2, 2], text_dim: 5120,
    timestep_input_dim: 256, time_embed_hidden_size: 5376, time_embed_dim: 2688, adaln_out_features: 96768,
    final_adaln_out_features: 10752, rope_inv_freq_len: 16, norm_eps: 1e-5, qk_norm_eps: 1e-5, final_norm_eps: 1e-5,
  },
  'released FL2VA config',
);

/** Scale tensor names int8 builds use for a weight `<m>.weight`. */
const scaleNames = (m: string) => [`${m}.weight_scale`, `${m}.weight.scale`, `${m}.scale_weight`];

/**
 * The native checkpoint presented under diffusers keys (`out` prefix). Every native tensor must be consumed by the
 * mapping; leftovers are refused.
 */
export function nativeView(ckpt: CheckpointLike, c: H3Config, src: string, out = '', qkvRows: QkvRows = 'interleaved'): KeyView {
  const recipes = new Map<string, Recipe>();
  const used = new Set<string>();
  const inner = c.numHeads * c.headDim;
  // one cached float32 source tensor: to_q, to_k and to_v come from one qkv_proj read
  let cache: { name: string; values: Float32Array } | null = null;
  const values = async (name: string): Promise<Float32Array> => {
    if (cache?.name === name) return cache.values;
    const entry = ckpt.entry(name);
    let v = await ckpt.readFloat32(name);
    if (entry.dtype === 'I8') v = dequantize(v, entry.shape, await readScale(ckpt, name));
    cache = { name, values: v };
    return v;
  };
  const readScale = async (ckptRef: CheckpointLike, weight: string): Promise<Float32Array> => {
    const m = weight.replace(/\.weight$/, '');
    const s = scaleNames(m).find((k) => ckptRef.has(k));
    if (!s) throw new CheckpointError(`${ckpt.path}: int8 tensor "${weight}" has no scale (looked for ${scaleNames(m).join(', ')})`);
    return ckptRef.readFloat32(s);
  };
  // the int8 cache's identity of values(name): the inner tensor's (and an int8 build's scale's)
  const valuesWhat = async (name: string): Promise<string | null> => {
    const w = (await ckpt.sourceIdentity?.(name))?.what;
    if (!w || ckpt.entry(name).dtype !== 'I8') return w ?? null;
    const s = scaleNames(name.replace(/\.weight$/, '')).find((k) => ckpt.has(k));
    const sw = s ? (await ckpt.sourceIdentity?.(s))?.what : undefined;
    return sw ? `dequantize(${w}, ${sw})` : null;
  };
  const claim = (name: string) => {
    used.add(name);
    const entry = ckpt.entry(name);
    if (entry.dtype === 'I8') for (const s of scaleNames(name.replace(/\.weight$/, ''))) if (ckpt.has(s)) used.add(s);
    return entry;
  };
  /** A renamed tensor: streamed as stored unless it is int8 (then dequantised). */
  const rename = (ours: string, theirs: string) => {
    const e = claim(src + theirs);
    recipes.set(out + ours, e.dtype === 'I8' ? { shape: e.shape, compute: () => values(src + theirs), what: () => valuesWhat(src + theirs) } : { alias: src + theirs });
  };
  const linear = (ours: string, theirs: string, bias: boolean) => {
    rename(`${ours}.weight`, `${theirs}.weight`);
    if (bias) rename(`${ours}.bias`, `${theirs}.bias`);
  };
  const attention = (ours: string, theirs: string) => {
    const qkv = `${src}${theirs}.qkv_proj.weight`;
    const e = claim(qkv);
    const H = e.shape[1]!;
    if (e.shape.length !== 2 || e.shape[0] !== 3 * inner) throw new CheckpointError(`${ckpt.path}: ${qkv} is [${e.shape}], expected [${3 * inner}, H]`);
    ['to_q', 'to_k', 'to_v'].forEach((name, part) => {
      recipes.set(`${out}${ours}.${name}.weight`, {
        shape: [inner, H],
        compute: async () => splitQkv(await values(qkv), c.numHeads, c.headDim, H, part, qkvRows),
        what: async () => then(await valuesWhat(qkv), (w) => `splitQkv(${w}, heads ${c.numHeads}, d ${c.headDim}, part ${part}, ${qkvRows})`),
      });
    });
    rename(`${ours}.to_out.0.weight`, `${theirs}.out_proj.weight`);
    rename(`${ours}.norm_q.weight`, `${theirs}.q_norm.weight`);
    rename(`${ours}.norm_k.weight`, `${theirs}.k_norm.weight`);
  };
  const mlp = (ours: string, theirs: string) => {
    const fc1 = `${src}${theirs}.fc1.weight`;
    const e = claim(fc1);
    recipes.set(`${out}${ours}.net.0.proj.weight`, {
      shape: e.shape,
      compute: async () => swapHalves(await values(fc1), e.shape[0]!, e.shape[1]!),
      what: async () => then(await valuesWhat(fc1), (w) => `swapHalves(${w})`),
    });
    rename(`${ours}.net.2.weight`, `${theirs}.fc2.weight`);
  };
  const block = (ours: string, theirs: string, adaln: boolean) => {
    rename(`${ours}.norm1.weight`, `${theirs}.norm1.weight`);
    rename(`${ours}.norm2.weight`, `${theirs}.norm2.weight`);
    attention(`${ours}.attn`, `${theirs}.attn`);
    mlp(`${ours}.ff`, `${theirs}.mlp`);
    if (adaln) linear(`${ours}.adaln_proj.linear`, `${theirs}.adaln_proj.linear`, true);
  };

  linear('proj_in', 'video_patch_proj', true);
  linear('audio_proj_in', 'audio_patch_proj', true);
  linear('context_embedder', 'condition_proj', true);
  linear('time_embedder.linear_1', 'time_embedder.proj_in', true);
  linear('time_embedder.linear_2', 'time_embedder.proj_out', true);
  for (let i = 0; i < c.numRefinerLayers; i++) block(`token_refiner.refiner_blocks.${i}`, `token_refiner.blocks.${i}`, false);
  rename('token_refiner.final_norm.weight', 'token_refiner.final_norm.weight');
  for (let i = 0; i < c.numLayers; i++) block(`transformer_blocks.${i}`, `blocks.${i}`, true);
  rename('norm_out.norm.weight', 'final_layer.norm.weight');
  linear('norm_out.linear', 'final_layer.adaln_proj.linear', true);
  linear('proj_out', 'final_layer.video_out', true);
  linear('audio_proj_out', 'final_layer.audio_out', true);

  // rope.inv_freq is recomputed (bitwise equal upstream); a stored one that differs means another model
  const inv = `${src}rope.inv_freq`;
  if (ckpt.has(inv)) {
    used.add(inv);
    const ours = h3InvFreq(c.ropeFreqDim, c.ropeTheta);
    recipes.set(`${out}rope.inv_freq`, {
      shape: [c.ropeFreqDim],
      compute: async () => {
        const theirs = await ckpt.readFloat32(inv);
        if (theirs.length !== ours.length || theirs.some((v, i) => v !== ours[i])) throw new CheckpointError(`${ckpt.path}: rope.inv_freq differs from 1 / theta^(2k / 2F) with theta ${c.ropeTheta}`);
        return theirs;
      },
    });
  }
  const left = ckpt.keys().filter((k) => k.startsWith(src) && !used.has(k));
  if (left.length) throw new CheckpointError(`${ckpt.path}: ${left.length} native tensors this loader does not know (${left.slice(0, 4).join(', ')}${left.length > 4 ? ', ...' : ''}): not a plain MiniMaxH3DiTModel checkpoint`);
  return new KeyView(ckpt.path, ckpt, recipes, false);
}

const then = (w: string | null, f: (w: string) => string): string | null => (w ? f(w) : null);

/**
 * Part (0 q, 1 k, 2 v) of fused rows as [heads * d, cols]: 'interleaved' rows are [heads, 3, d], 'stacked' [3, heads, d].
 * Works for weights (cols = H) and for a LoRA up matrix (cols = rank).
 */
export function splitQkv(w: Float32Array, heads: number, d: number, cols: number, part: number, rows: QkvRows): Float32Array {
  const n = heads * d * cols;
  if (rows === 'stacked') return w.slice(part * n, (part + 1) * n);
  const out = new Float32Array(n);
  for (let h = 0; h < heads; h++) out.set(w.subarray((h * 3 + part) * d * cols, (h * 3 + part + 1) * d * cols), h * d * cols);
  return out;
}

/** [a; b] -> [b; a] along rows ([2F, H]). */
export function swapHalves(w: Float32Array, rows: number, cols: number): Float32Array {
  const half = (rows / 2) * cols;
  const out = new Float32Array(w.length);
  out.set(w.subarray(half), 0);
  out.set(w.subarray(0, half), half);
  return out;
}

/** q * scale with one scale for the tensor or one per output row. */
export function dequantize(q: Float32Array, shape: number[], scale: Float32Array): Float32Array {
  const rows = shape[0]!;
  const cols = q.length / rows;
  if (scale.length !== 1 && scale.length !== rows) throw new CheckpointError(`int8 scale has ${scale.length} values for ${rows} rows`);
  const out = new Float32Array(q.length);
  for (let r = 0; r < rows; r++) {
    const s = scale.length === 1 ? scale[0]! : scale[r]!;
    for (let k = 0; k < cols; k++) out[r * cols + k] = Math.fround(q[r * cols + k]! * s);
  }
  return out;
}
