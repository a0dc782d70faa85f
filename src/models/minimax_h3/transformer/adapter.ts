// The turbo adapters (lightx2v/Minimax-h3-Turbo and LoRAs like them) merged into the transformer's weights at load:
// W' = W + strength * scale * up @ down for every adapted linear, before any int8 quantisation (turbo_int8,
// fastvid_4step_int8), so sampling runs the plain merged model at no extra cost.
//
// Key formats accepted (one module stem, then its tensors):
//   <stem>.lora_A.weight [r, K] + <stem>.lora_B.weight [N, r]         PEFT / diffusers names, scale 1
//   <stem>.lora_down.weight + <stem>.lora_up.weight (+ <stem>.alpha)   kohya names, scale alpha / r (1 without alpha)
// Stems, after stripping a wrapper (diffusion_model., transformer., base_model.model.):
//   diffusers names: transformer_blocks.N.attn.to_q ..., used as they are
//   native names (ComfyUI / lightx2v, the published turbo files): blocks.N.attn.qkv_proj (up rows split into q/k/v
//   with the shared down; row order as QkvRows), blocks.N.attn.out_proj, blocks.N.mlp.fc1 (up halves swapped:
//   [gate; value] -> our [value; gate]), blocks.N.mlp.fc2, blocks.N.adaln_proj.linear, token_refiner.blocks.N.*,
//   final_layer.adaln_proj.linear, condition_proj.
// Tensors that are not low-rank pairs (full-weight "set" patches, diff / diff_b, DoRA magnitudes, curve tables of
// pruned adapters) are refused by name: merging them wrong would render a plausible wrong video.
import { createHash } from 'node:crypto';
import { Checkpoint, CheckpointError } from '../../../engine/safetensors';
import { writeSafetensors, type WriteTensor } from '../../../engine/safetensors-writer';
import type { Engine } from '../../../engine/engine';
import { linear } from '../../../engine/ops/linear';
import type { H3Config } from './config';
import { KeyView, splitQkv, type CheckpointLike, type H3WeightSource, type QkvRows, type Recipe } from './native-checkpoint';

/** One adapted linear: W [N, K] += scale * up [N, r] @ down [r, K]. */
export interface LowRankDelta {
  down: Float32Array;
  up: Float32Array;
  rank: number;
  /** alpha / rank (1 without alpha). */
  scale: number;
}

export interface H3Adapter {
  path: string;
  /** By the diffusers weight key it changes, e.g. "transformer_blocks.0.attn.to_q.weight". */
  deltas: Map<string, LowRankDelta>;
}

const WRAPPERS = ['diffusion_model.', 'transformer.', 'base_model.model.'];
const ROLES: [suffix: string, role: 'down' | 'up' | 'alpha'][] = [
  ['.lora_A.weight', 'down'],
  ['.lora_B.weight', 'up'],
  ['.lora_down.weight', 'down'],
  ['.lora_up.weight', 'up'],
  ['.alpha', 'alpha'],
];

/** native module tail -> ours (renames only; qkv and fc1 are transformed). */
const BLOCK_RENAMES: Record<string, string> = {
  'attn.out_proj': 'attn.to_out.0',
  'mlp.fc2': 'ff.net.2',
  'adaln_proj.linear': 'adaln_proj.linear',
};
const TOP_RENAMES: Record<string, string> = { 'final_layer.adaln_proj.linear': 'norm_out.linear', condition_proj: 'context_embedder' };

/**
 * Reads an adapter file and maps it onto the diffusers weight keys of `config`'s transformer. `qkvRows`: row order
 * of a fused qkv_proj up matrix (the published turbo adapters are ComfyUI-keyed: 'stacked').
 */
export async function openH3Adapter(path: string, config: H3Config, opts: { qkvRows?: QkvRows } = {}): Promise<H3Adapter> {
  const ckpt = await Checkpoint.open(path);
  try {
    const groups = new Map<string, Partial<Record<'down' | 'up' | 'alpha', string>>>();
    const unknown: string[] = [];
    for (const key of ckpt.keys()) {
      const role = ROLES.find(([s]) => key.endsWith(s));
      if (!role) {
        unknown.push(key);
        continue;
      }
      let stem = key.slice(0, -role[0].length);
      for (const w of WRAPPERS) if (stem.startsWith(w)) stem = stem.slice(w.length);
      const g = groups.get(stem) ?? {};
      g[role[1]] = key;
      groups.set(stem, g);
    }
    if (unknown.length) throw new CheckpointError(`${path}: ${unknown.length} tensors are not LoRA pairs (${unknown.slice(0, 4).join(', ')}${unknown.length > 4 ? ', ...' : ''}); only low-rank adapters are merged`);
    const deltas = new Map<string, LowRankDelta>();
    const add = (ours: string, d: LowRankDelta) => {
      if (deltas.has(ours)) throw new CheckpointError(`${path}: two adapters for ${ours}`);
      deltas.set(ours, d);
    };
    for (const [stem, g] of groups) {
      if (!g.down || !g.up) throw new CheckpointError(`${path}: ${stem} has ${g.down ? 'no up' : 'no down'} matrix`);
      const de = ckpt.entry(g.down);
      const ue = ckpt.entry(g.up);
      const rank = de.shape[0]!;
      if (de.shape.length !== 2 || ue.shape.length !== 2 || ue.shape[1] !== rank) throw new CheckpointError(`${path}: ${stem} down [${de.shape}] and up [${ue.shape}] do not make a rank-r pair`);
      const scale = g.alpha ? (await ckpt.readFloat32(g.alpha))[0]! / rank : 1;
      const down = await ckpt.readFloat32(g.down);
      const up = await ckpt.readFloat32(g.up);
      const d = (u: Float32Array): LowRankDelta => ({ down, up: u, rank, scale });
      const block = /^(blocks|token_refiner\.blocks)\.(\d+)\.(.+)$/.exec(stem);
      if (!block) {
        if (stem in TOP_RENAMES) add(`${TOP_RENAMES[stem]}.weight`, d(up));
        else add(`${stem}.weight`, d(up)); // diffusers-named (checked against the model below)
        continue;
      }
      const ours = `${block[1] === 'blocks' ? 'transformer_blocks' : 'token_refiner.refiner_blocks'}.${block[2]}`;
      const tail = block[3]!;
      if (tail === 'attn.qkv_proj') {
        const rows = opts.qkvRows ?? 'stacked';
        ['to_q', 'to_k', 'to_v'].forEach((n, part) => add(`${ours}.attn.${n}.weight`, d(splitQkv(up, config.numHeads, config.headDim, rank, part, rows))));
      } else if (tail === 'mlp.fc1') {
        const half = up.length / 2;
        const swapped = new Float32Array(up.length);
        swapped.set(up.subarray(half), 0);
        swapped.set(up.subarray(0, half), half);
        add(`${ours}.ff.net.0.proj.weight`, d(swapped));
      } else if (tail in BLOCK_RENAMES) add(`${ours}.${BLOCK_RENAMES[tail]}.weight`, d(up));
      else throw new CheckpointError(`${path}: adapter module ${stem} is not a MiniMax H3 linear this loader knows`);
    }
    if (deltas.size === 0) throw new CheckpointError(`${path}: no adapter tensors`);
    return { path, deltas };
  } finally {
    await ckpt.close();
  }
}

/** Row blocks of the GPU product, so one [rows, K] f32 result stays well under binding limits. */
const MERGE_ROWS_BYTES = 64 * 2 ** 20;

/** scale * up [N, r] @ down [r, K] as [N, K] float32: on the GPU when an engine is given, else on the CPU. */
export async function lowRankProduct(d: LowRankDelta, N: number, K: number, e?: Engine): Promise<Float32Array> {
  const { rank: r, up, down, scale } = d;
  const out = new Float32Array(N * K);
  if (!e) {
    for (let n = 0; n < N; n++) {
      const row = out.subarray(n * K, (n + 1) * K);
      for (let j = 0; j < r; j++) {
        const a = Math.fround(up[n * r + j]! * scale);
        if (a === 0) continue;
        const src = down.subarray(j * K, (j + 1) * K);
        for (let k = 0; k < K; k++) row[k] = row[k]! + a * src[k]!;
      }
    }
    return out;
  }
  // linear(x, W) = x @ W^T: x = scale * up rows [n, r], W = down^T [K, r]
  const downT = new Float32Array(K * r);
  for (let j = 0; j < r; j++) for (let k = 0; k < K; k++) downT[k * r + j] = down[j * K + k]!;
  const w = e.upload(downT, [K, r], 'f32', 'adapter down^T');
  try {
    const step = Math.max(1, Math.floor(MERGE_ROWS_BYTES / (K * 4)));
    for (let n0 = 0; n0 < N; n0 += step) {
      const n1 = Math.min(N, n0 + step);
      const x = e.upload(up.subarray(n0 * r, n1 * r).map((v) => Math.fround(v * scale)), [n1 - n0, r], 'f32', 'adapter up');
      const y = linear(e, x, w);
      x.free();
      out.set(await e.read(y), n0 * K);
      y.free();
    }
  } finally {
    w.free();
  }
  return out;
}

/**
 * `source` with the adapter merged: every adapted weight is read as float32 and gets strength * delta added; all
 * other tensors pass through as stored. Each adapted key must exist in the model with the delta's shape.
 */
export function mergeAdapter(source: H3WeightSource, adapter: H3Adapter, opts: { strength?: number; engine?: Engine } = {}): H3WeightSource {
  const base: CheckpointLike = source.view;
  const strength = opts.strength ?? 1;
  const recipes = new Map<string, Recipe>();
  for (const [key, d] of adapter.deltas) {
    const name = source.prefix + key;
    if (!base.has(name)) throw new CheckpointError(`${adapter.path}: adapts ${key}, which the transformer does not have`);
    const shape = base.entry(name).shape;
    const [N, K] = shape as [number, number];
    if (shape.length !== 2 || d.up.length !== N * d.rank || d.down.length !== d.rank * K) {
      throw new CheckpointError(`${adapter.path}: the adapter of ${key} (rank ${d.rank}, up ${d.up.length / d.rank} rows, down ${d.down.length / d.rank} columns) does not fit [${shape}]`);
    }
    recipes.set(name, {
      shape,
      // the int8 cache's identity: the base weight's, the delta's exact values (rank x (N + K) floats, the adapter
      // file's mapping included), the strength, and where the product is computed (GPU and CPU may round apart)
      what: async () => {
        const w = (await base.sourceIdentity?.(name))?.what;
        if (!w) return null;
        const h = createHash('sha256').update(new Uint8Array(d.up.buffer, d.up.byteOffset, d.up.byteLength)).update(new Uint8Array(d.down.buffer, d.down.byteOffset, d.down.byteLength)).digest('hex');
        const where = opts.engine ? `gpu ${opts.engine.describe().name}` : 'cpu';
        return `merge(${w}, delta ${h} rank ${d.rank} scale ${d.scale} strength ${strength}, ${where})`;
      },
      compute: async () => {
        const w = await base.readFloat32(name);
        const delta = await lowRankProduct(strength === 1 ? d : { ...d, scale: d.scale * strength }, N, K, opts.engine);
        for (let i = 0; i < w.length; i++) w[i] = w[i]! + delta[i]!;
        return w;
      },
    });
  }
  const view = new KeyView(`${source.path} + ${adapter.path}`, base, recipes, true);
  return { ...source, view, checkpoint: () => view.asCheckpoint() };
}

/**
 * A random adapter in the published turbo files' format (ComfyUI-keyed native names, lora_A / lora_B, no alpha,
 * stacked qkv rows) for `config`'s transformer: the demo checkpoints of turbo_int8 / fastvid_4step_int8. Values are
 * small (|delta| ~ `magnitude`) so the merged demo model stays close to its base.
 */
export async function writeDemoAdapter(path: string, config: H3Config, opts: { rank?: number; seed?: number; magnitude?: number; holes?: boolean } = {}): Promise<void> {
  const r = opts.rank ?? 4;
  let s = (opts.seed ?? 1) >>> 0;
  const rand = () => {
    // mulberry32
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296 - 0.5;
  };
  const amp = Math.sqrt((opts.magnitude ?? 0.01) / r);
  const H = config.hiddenSize;
  const inner = config.numHeads * config.headDim;
  const t: Record<string, WriteTensor> = {};
  const pair = (stem: string, N: number, K: number) => {
    // holes: the headers alone (a planned checkpoint, src/plan), read back as zeros
    t[`diffusion_model.${stem}.lora_A.weight`] = { dtype: 'F32', shape: [r, K], data: opts.holes ? null : Float32Array.from({ length: r * K }, () => amp * rand()) };
    t[`diffusion_model.${stem}.lora_B.weight`] = { dtype: 'F32', shape: [N, r], data: opts.holes ? null : Float32Array.from({ length: N * r }, () => amp * rand()) };
  };
  const block = (p: string) => {
    pair(`${p}.attn.qkv_proj`, 3 * inner, H);
    pair(`${p}.attn.out_proj`, H, inner);
    pair(`${p}.mlp.fc1`, 2 * config.ffnDim, H);
    pair(`${p}.mlp.fc2`, H, config.ffnDim);
  };
  for (let i = 0; i < config.numLayers; i++) block(`blocks.${i}`);
  for (let i = 0; i < config.numRefinerLayers; i++) block(`token_refiner.blocks.${i}`);
  await writeSafetensors(path, t, { format: 'kiln demo MiniMax H3 turbo adapter (random)' });
}
