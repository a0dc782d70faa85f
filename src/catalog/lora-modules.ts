// The LoRA-able linears of each model by Kiln's module names and shapes, from a config's sizes alone (so the API can
// check a file's header before any model is loaded), with the community names each file style uses for them. The
// check of a file against a table is loras.ts; docs/loras.md.
//
// Krea 2 (native = krea-ai/krea-2 SingleStreamDiT names, what the released file and its reference trainer / ComfyUI /
// ai-toolkit LoRAs use): first, tmlp.{0,2}, tproj.1, blocks.N.attn.{wq,wk,wv,gate,wo}, blocks.N.mlp.{gate,up,down},
// txtfusion.{layerwise_blocks,refiner_blocks}.N.attn.* / .mlp.*, txtfusion.projector, txtmlp.{1,3}, last.linear.
// diffusers' Krea2Transformer2DModel names (diffusers' own LoRA files, `_convert_non_diffusers_krea2_lora_to_diffusers`
// in reverse): img_in, time_embed.linear_{1,2}, time_mod_proj, transformer_blocks.N.attn.{to_q,to_k,to_v,to_gate,
// to_out.0}, transformer_blocks.N.ff.{gate,up,down}, text_fusion.<stage>.N.attn.* / .ff.*, text_fusion.projector,
// txt_in.linear_{1,2}, final_layer.linear.
// MiniMax H3 (the video profiles): h3LoraModules below; Kiln's names are its diffusers checkpoint's keys, the native
// (ComfyUI / lightx2v) names map onto them, fused qkv_proj and fc1 included.
// Qwen-Image-2.1: Kiln's names are diffusers' (QwenImage21Transformer2DModel): transformer_blocks.N.attn.{to_q,to_k,
// to_v,to_out.0}, transformer_blocks.N.img_mlp.{proj,gate_layer,out}, img_in, txt_in.{in_layer,out_layer},
// time_text_embed.timestep_embedder.linear_{1,2}, modulation.1, norm_out.linear, proj_out.

/** The LoRA-able linears of one model: Kiln's module names (its checkpoint keys without `.weight`) and shapes. */
export interface LoraModelNames {
  /** Short id ("krea2", "qwen_image21"). */
  model: string;
  /** For messages ("Krea 2"). */
  label: string;
  /** Kiln module name -> [out N, in K]. */
  modules: ReadonlyMap<string, readonly [number, number]>;
  /** Another community's name of a module (diffusers' for Krea 2, ...) -> Kiln's; undefined when it is none. */
  alias(stem: string): string | undefined;
  /** Every alias stem of `module` the model knows (for the kohya underscore table). */
  aliasesOf(module: string): string[];
  /** A stem the community uses for several of Kiln's modules, or for one in another row order (MiniMax H3's fused
   * qkv_proj, its fc1 stored [gate; value]); undefined when `stem` is none. */
  fused?(stem: string): LoraFusedModule | undefined;
  /** Every fused stem (for the kohya underscore table). */
  fusedStems?(): string[];
}

/** One pair of the file [N, K] whose up rows feed several modules: each part's up is the concatenation of the file's
 * up row ranges `rows` (in order; a range is [first, end)). The down matrix is shared. */
export interface LoraFusedModule {
  shape: readonly [number, number];
  parts: { module: string; rows: [number, number][] }[];
}

/** The Krea 2 config fields its linears' shapes follow (models/krea2/config.ts Krea2Config has them all, and the
 * fusion stages' block count). */
export interface Krea2LoraDims {
  features: number; headDim: number; tokenDim: number; tdim: number; txtdim: number; txtlayers: number; layers: number;
  heads: number; kvheads: number; mlpDim: number; txtheads: number; txtkvheads: number; txtHeadDim: number; txtMlpDim: number;
  fusionBlocks: number;
}

/** The Qwen-Image-2.1 config fields its linears' shapes follow (models/qwen_image21/config.ts QwenImage21Config). */
export interface QwenImage21LoraDims {
  dim: number; mlpRatio: number; contextInDim: number; inChannels: number; outChannels: number; numLayers: number;
}

/** Which model (and at which sizes) a profile's LoRAs are applied to: what a GPU worker reports per image profile
 * (worker/protocol.ts ServedSummary.lora), so the API checks a file against the checkpoint that will run it. */
export type LoraModel = { model: 'krea2'; dims: Krea2LoraDims } | { model: 'qwen_image21'; dims: QwenImage21LoraDims } | { model: 'minimax_h3'; dims: H3LoraDims };

/** The MiniMax H3 config fields its linears' shapes follow (models/minimax_h3/transformer/config.ts H3Config; patchDim =
 * videoPatchDim). */
export interface H3LoraDims {
  hiddenSize: number; numHeads: number; headDim: number; numLayers: number; numRefinerLayers: number; ffnDim: number;
  textDim: number; patchDim: number; audioInChannels: number; freqDim: number; timeEmbedHiddenDim: number; timeEmbedDim: number;
}

type Shape = readonly [number, number];

function names(model: string, label: string, modules: Map<string, Shape>, toKiln: [RegExp, string][], fromKiln: [RegExp, string][]): LoraModelNames {
  const rewrite = (table: [RegExp, string][], s: string): string | undefined => {
    for (const [re, to] of table) if (re.test(s)) return s.replace(re, to);
    return undefined;
  };
  return {
    model,
    label,
    modules,
    alias(stem) {
      const m = rewrite(toKiln, stem);
      return m !== undefined && modules.has(m) ? m : undefined;
    },
    aliasesOf(module) {
      const a = rewrite(fromKiln, module);
      return a === undefined ? [] : [a];
    },
  };
}

const KREA2_ATTN: Record<string, string> = { wq: 'to_q', wk: 'to_k', wv: 'to_v', gate: 'to_gate', wo: 'to_out.0' };
const KREA2_TOP: Record<string, string> = {
  first: 'img_in',
  'tmlp.0': 'time_embed.linear_1',
  'tmlp.2': 'time_embed.linear_2',
  'tproj.1': 'time_mod_proj',
  'txtmlp.1': 'txt_in.linear_1',
  'txtmlp.3': 'txt_in.linear_2',
  'last.linear': 'final_layer.linear',
  'txtfusion.projector': 'text_fusion.projector',
};
const esc = (s: string) => s.replace(/\./g, '\\.');

/** diffusers -> native, and native -> diffusers, as ordered rewrite rules. */
function krea2Rules(): { toKiln: [RegExp, string][]; fromKiln: [RegExp, string][] } {
  const toKiln: [RegExp, string][] = [];
  const fromKiln: [RegExp, string][] = [];
  for (const [n, d] of Object.entries(KREA2_TOP)) {
    toKiln.push([new RegExp(`^${esc(d)}$`), n]);
    fromKiln.push([new RegExp(`^${esc(n)}$`), d]);
  }
  for (const [n, d] of Object.entries(KREA2_ATTN)) {
    toKiln.push([new RegExp(`^transformer_blocks\\.(\\d+)\\.attn\\.${esc(d)}$`), `blocks.$1.attn.${n}`]);
    toKiln.push([new RegExp(`^text_fusion\\.(layerwise_blocks|refiner_blocks)\\.(\\d+)\\.attn\\.${esc(d)}$`), `txtfusion.$1.$2.attn.${n}`]);
    fromKiln.push([new RegExp(`^blocks\\.(\\d+)\\.attn\\.${n}$`), `transformer_blocks.$1.attn.${d}`]);
    fromKiln.push([new RegExp(`^txtfusion\\.(layerwise_blocks|refiner_blocks)\\.(\\d+)\\.attn\\.${n}$`), `text_fusion.$1.$2.attn.${d}`]);
  }
  toKiln.push([/^transformer_blocks\.(\d+)\.ff\.(gate|up|down)$/, 'blocks.$1.mlp.$2']);
  toKiln.push([/^text_fusion\.(layerwise_blocks|refiner_blocks)\.(\d+)\.ff\.(gate|up|down)$/, 'txtfusion.$1.$2.mlp.$3']);
  fromKiln.push([/^blocks\.(\d+)\.mlp\.(gate|up|down)$/, 'transformer_blocks.$1.ff.$2']);
  fromKiln.push([/^txtfusion\.(layerwise_blocks|refiner_blocks)\.(\d+)\.mlp\.(gate|up|down)$/, 'text_fusion.$1.$2.ff.$3']);
  return { toKiln, fromKiln };
}

/** Krea 2's LoRA-able linears (every linear of the DiT, its text fusion and its text projection). */
export function krea2LoraModules(d: Krea2LoraDims): LoraModelNames {
  const D = d.features;
  const m = new Map<string, Shape>([
    ['first', [D, d.tokenDim]],
    ['tmlp.0', [D, d.tdim]],
    ['tmlp.2', [D, D]],
    ['tproj.1', [6 * D, D]],
    ['txtmlp.1', [D, d.txtdim]],
    ['txtmlp.3', [D, D]],
    ['last.linear', [d.tokenDim, D]],
    ['txtfusion.projector', [1, d.txtlayers]],
  ]);
  const block = (p: string, dim: number, heads: number, kv: number, headDim: number, mlp: number) => {
    m.set(`${p}attn.wq`, [heads * headDim, dim]);
    m.set(`${p}attn.wk`, [kv * headDim, dim]);
    m.set(`${p}attn.wv`, [kv * headDim, dim]);
    m.set(`${p}attn.gate`, [dim, dim]);
    m.set(`${p}attn.wo`, [dim, heads * headDim]);
    m.set(`${p}mlp.gate`, [mlp, dim]);
    m.set(`${p}mlp.up`, [mlp, dim]);
    m.set(`${p}mlp.down`, [dim, mlp]);
  };
  for (let i = 0; i < d.layers; i++) block(`blocks.${i}.`, D, d.heads, d.kvheads, d.headDim, d.mlpDim);
  for (const stage of ['layerwise_blocks', 'refiner_blocks']) {
    for (let i = 0; i < d.fusionBlocks; i++) block(`txtfusion.${stage}.${i}.`, d.txtdim, d.txtheads, d.txtkvheads, d.txtHeadDim, d.txtMlpDim);
  }
  const { toKiln, fromKiln } = krea2Rules();
  return names('krea2', 'Krea 2', m, toKiln, fromKiln);
}

/** Qwen-Image-2.1's LoRA-able linears (Kiln's names are diffusers' own). */
export function qwenImage21LoraModules(d: QwenImage21LoraDims): LoraModelNames {
  const D = d.dim;
  const hidden = D * d.mlpRatio;
  const m = new Map<string, Shape>([
    ['time_text_embed.timestep_embedder.linear_1', [D, 256]],
    ['time_text_embed.timestep_embedder.linear_2', [D, D]],
    ['txt_in.in_layer', [D, d.contextInDim]],
    ['txt_in.out_layer', [D, D]],
    ['img_in', [D, d.inChannels]],
    ['modulation.1', [4 * D, D]],
    ['norm_out.linear', [D, D]],
    ['proj_out', [d.outChannels, D]],
  ]);
  for (let i = 0; i < d.numLayers; i++) {
    const p = `transformer_blocks.${i}.`;
    for (const n of ['to_q', 'to_k', 'to_v', 'to_out.0']) m.set(`${p}attn.${n}`, [D, D]);
    m.set(`${p}img_mlp.proj`, [hidden, D]);
    m.set(`${p}img_mlp.gate_layer`, [hidden, D]);
    m.set(`${p}img_mlp.out`, [D, hidden]);
  }
  return names('qwen_image21', 'Qwen-Image-2.1', m, [], []);
}

/** MiniMax H3's native (MiniMaxH3DiTModel / ComfyUI) top-level names -> Kiln's (diffusers') ones. */
const H3_TOP: Record<string, string> = {
  video_patch_proj: 'proj_in',
  audio_patch_proj: 'audio_proj_in',
  condition_proj: 'context_embedder',
  'time_embedder.proj_in': 'time_embedder.linear_1',
  'time_embedder.proj_out': 'time_embedder.linear_2',
  'final_layer.adaln_proj.linear': 'norm_out.linear',
  'final_layer.video_out': 'proj_out',
  'final_layer.audio_out': 'audio_proj_out',
};

/**
 * MiniMax H3's LoRA-able linears (Kiln's names are the diffusers checkpoint's keys without `.weight`, the transformer's
 * fields): proj_in, audio_proj_in, context_embedder, time_embedder.linear_{1,2}, token_refiner.refiner_blocks.N.* and
 * transformer_blocks.N.* (attn.{to_q,to_k,to_v,to_out.0}, ff.net.0.proj, ff.net.2, and the blocks' adaln_proj.linear),
 * norm_out.linear, proj_out, audio_proj_out. The native names the MiniMax community's
 * LoRAs use (ComfyUI / lightx2v: what transformer/adapter.ts merges for the turbo adapters) map onto them: renames
 * (blocks.N -> transformer_blocks.N, token_refiner.blocks.N -> token_refiner.refiner_blocks.N, attn.out_proj,
 * mlp.fc2, H3_TOP) and two transforms of the up matrix: attn.qkv_proj [3 inner, H] is to_q / to_k / to_v with the
 * down shared (rows stacked [q; k; v], the ComfyUI-keyed files' order, as adapter.ts reads them), mlp.fc1 [2F, H]
 * is stored [gate; value] where ff.net.0.proj is [value; gate].
 */
export function h3LoraModules(d: H3LoraDims): LoraModelNames {
  const H = d.hiddenSize;
  const inner = d.numHeads * d.headDim;
  const F = d.ffnDim;
  const m = new Map<string, Shape>([
    ['proj_in', [H, d.patchDim]],
    ['audio_proj_in', [H, d.audioInChannels]],
    ['context_embedder', [H, d.textDim]],
    ['time_embedder.linear_1', [d.timeEmbedHiddenDim, d.freqDim]],
    ['time_embedder.linear_2', [d.timeEmbedDim, d.timeEmbedHiddenDim]],
  ]);
  const block = (p: string) => {
    for (const n of ['to_q', 'to_k', 'to_v']) m.set(`${p}attn.${n}`, [inner, H]);
    m.set(`${p}attn.to_out.0`, [H, inner]);
    m.set(`${p}ff.net.0.proj`, [2 * F, H]);
    m.set(`${p}ff.net.2`, [H, F]);
  };
  for (let i = 0; i < d.numRefinerLayers; i++) block(`token_refiner.refiner_blocks.${i}.`);
  for (let i = 0; i < d.numLayers; i++) {
    block(`transformer_blocks.${i}.`);
    m.set(`transformer_blocks.${i}.adaln_proj.linear`, [18 * H, d.timeEmbedDim]);
  }
  m.set('norm_out.linear', [2 * H, d.timeEmbedDim]);
  m.set('proj_out', [d.patchDim, H]);
  m.set('audio_proj_out', [d.audioInChannels, H]);
  const toKiln: [RegExp, string][] = [];
  const fromKiln: [RegExp, string][] = [];
  for (const [n, k] of Object.entries(H3_TOP)) {
    toKiln.push([new RegExp(`^${esc(n)}$`), k]);
    fromKiln.push([new RegExp(`^${esc(k)}$`), n]);
  }
  toKiln.push([/^blocks\.(\d+)\.attn\.out_proj$/, 'transformer_blocks.$1.attn.to_out.0']);
  toKiln.push([/^blocks\.(\d+)\.mlp\.fc2$/, 'transformer_blocks.$1.ff.net.2']);
  toKiln.push([/^blocks\.(\d+)\.adaln_proj\.linear$/, 'transformer_blocks.$1.adaln_proj.linear']);
  toKiln.push([/^token_refiner\.blocks\.(\d+)\.attn\.out_proj$/, 'token_refiner.refiner_blocks.$1.attn.to_out.0']);
  toKiln.push([/^token_refiner\.blocks\.(\d+)\.mlp\.fc2$/, 'token_refiner.refiner_blocks.$1.ff.net.2']);
  fromKiln.push([/^transformer_blocks\.(\d+)\.attn\.to_out\.0$/, 'blocks.$1.attn.out_proj']);
  fromKiln.push([/^transformer_blocks\.(\d+)\.ff\.net\.2$/, 'blocks.$1.mlp.fc2']);
  fromKiln.push([/^transformer_blocks\.(\d+)\.adaln_proj\.linear$/, 'blocks.$1.adaln_proj.linear']);
  fromKiln.push([/^token_refiner\.refiner_blocks\.(\d+)\.attn\.to_out\.0$/, 'token_refiner.blocks.$1.attn.out_proj']);
  fromKiln.push([/^token_refiner\.refiner_blocks\.(\d+)\.ff\.net\.2$/, 'token_refiner.blocks.$1.mlp.fc2']);
  const base = names('minimax_h3', 'MiniMax H3', m, toKiln, fromKiln);
  const fusedStems: string[] = [];
  for (let i = 0; i < d.numLayers; i++) fusedStems.push(`blocks.${i}.attn.qkv_proj`, `blocks.${i}.mlp.fc1`);
  for (let i = 0; i < d.numRefinerLayers; i++) fusedStems.push(`token_refiner.blocks.${i}.attn.qkv_proj`, `token_refiner.blocks.${i}.mlp.fc1`);
  return {
    ...base,
    fused(stem) {
      const f = /^(blocks|token_refiner\.blocks)\.(\d+)\.(attn\.qkv_proj|mlp\.fc1)$/.exec(stem);
      if (!f) return undefined;
      const ours = `${f[1] === 'blocks' ? 'transformer_blocks' : 'token_refiner.refiner_blocks'}.${f[2]}`;
      if (!m.has(`${ours}.attn.to_q`)) return undefined; // a block the model does not have
      if (f[3] === 'attn.qkv_proj') {
        return { shape: [3 * inner, H], parts: ['to_q', 'to_k', 'to_v'].map((n, i) => ({ module: `${ours}.attn.${n}`, rows: [[i * inner, (i + 1) * inner]] })) };
      }
      return { shape: [2 * F, H], parts: [{ module: `${ours}.ff.net.0.proj`, rows: [[F, 2 * F], [0, F]] }] };
    },
    fusedStems: () => fusedStems,
  };
}

/** The module table of a worker's report. */
export function loraModulesOf(m: LoraModel): LoraModelNames {
  if (m.model === 'minimax_h3') return h3LoraModules(m.dims);
  return m.model === 'krea2' ? krea2LoraModules(m.dims) : qwenImage21LoraModules(m.dims);
}
