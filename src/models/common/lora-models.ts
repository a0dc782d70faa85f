// The LoRA-able linears of the image models, by Kiln's module names (each model's own checkpoint keys without
// `.weight`), the other names the communities use for them, and the loaded model's weight objects they are.
//
// Krea 2 (src/models/krea2; native = krea-ai/krea-2 SingleStreamDiT names, what the released file and its reference
// trainer / ComfyUI / ai-toolkit LoRAs use): first, tmlp.{0,2}, tproj.1, blocks.N.attn.{wq,wk,wv,gate,wo},
// blocks.N.mlp.{gate,up,down}, txtfusion.{layerwise_blocks,refiner_blocks}.N.attn.* / .mlp.*, txtfusion.projector,
// txtmlp.{1,3}, last.linear. diffusers' Krea2Transformer2DModel names (diffusers' own LoRA files,
// `_convert_non_diffusers_krea2_lora_to_diffusers` in reverse): img_in, time_embed.linear_{1,2}, time_mod_proj,
// transformer_blocks.N.attn.{to_q,to_k,to_v,to_gate,to_out.0}, transformer_blocks.N.ff.{gate,up,down},
// text_fusion.<stage>.N.attn.* / .ff.*, text_fusion.projector, txt_in.linear_{1,2}, final_layer.linear.
// Qwen-Image-2.1 (src/models/qwen_image21): Kiln's names are diffusers' (QwenImage21Transformer2DModel):
// transformer_blocks.N.attn.{to_q,to_k,to_v,to_out.0}, transformer_blocks.N.img_mlp.{proj,gate_layer,out},
// img_in, txt_in.{in_layer,out_layer}, time_text_embed.timestep_embedder.linear_{1,2}, modulation.1,
// norm_out.linear, proj_out.
import type { Krea2Config } from '../krea2/config';
import { KREA2_FUSION_BLOCKS } from '../krea2/config';
import type { Krea2Transformer } from '../krea2/transformer';
import type { QwenImage21Config } from '../qwen_image21/config';
import type { QwenImage21Transformer } from '../qwen_image21/transformer';
import type { LoraModelNames } from './lora';
import type { LinearWeight } from './weights';

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

/** Krea 2's LoRA-able linears for `cfg` (every linear of the DiT, its text fusion and its text projection). */
export function krea2LoraNames(cfg: Krea2Config): LoraModelNames {
  const D = cfg.features;
  const hd = cfg.headDim;
  const m = new Map<string, Shape>([
    ['first', [D, cfg.tokenDim]],
    ['tmlp.0', [D, cfg.tdim]],
    ['tmlp.2', [D, D]],
    ['tproj.1', [6 * D, D]],
    ['txtmlp.1', [D, cfg.txtdim]],
    ['txtmlp.3', [D, D]],
    ['last.linear', [cfg.tokenDim, D]],
    ['txtfusion.projector', [1, cfg.txtlayers]],
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
  for (let i = 0; i < cfg.layers; i++) block(`blocks.${i}.`, D, cfg.heads, cfg.kvheads, hd, cfg.mlpDim);
  for (const stage of ['layerwise_blocks', 'refiner_blocks']) {
    for (let i = 0; i < KREA2_FUSION_BLOCKS; i++) block(`txtfusion.${stage}.${i}.`, cfg.txtdim, cfg.txtheads, cfg.txtkvheads, cfg.txtHeadDim, cfg.txtMlpDim);
  }
  const { toKiln, fromKiln } = krea2Rules();
  return names('krea2', 'Krea 2', m, toKiln, fromKiln);
}

/** Qwen-Image-2.1's LoRA-able linears for `cfg` (Kiln's names are diffusers' own). */
export function qwenImage21LoraNames(cfg: QwenImage21Config): LoraModelNames {
  const D = cfg.dim;
  const hidden = D * cfg.mlpRatio;
  const m = new Map<string, Shape>([
    ['time_text_embed.timestep_embedder.linear_1', [D, 256]],
    ['time_text_embed.timestep_embedder.linear_2', [D, D]],
    ['txt_in.in_layer', [D, cfg.contextInDim]],
    ['txt_in.out_layer', [D, D]],
    ['img_in', [D, cfg.inChannels]],
    ['modulation.1', [4 * D, D]],
    ['norm_out.linear', [D, D]],
    ['proj_out', [cfg.outChannels, D]],
  ]);
  for (let i = 0; i < cfg.numLayers; i++) {
    const p = `transformer_blocks.${i}.`;
    for (const n of ['to_q', 'to_k', 'to_v', 'to_out.0']) m.set(`${p}attn.${n}`, [D, D]);
    m.set(`${p}img_mlp.proj`, [hidden, D]);
    m.set(`${p}img_mlp.gate_layer`, [hidden, D]);
    m.set(`${p}img_mlp.out`, [D, hidden]);
  }
  return names('qwen_image21', 'Qwen-Image-2.1', m, [], []);
}

/** Krea 2's loaded linears by module name (the objects lora-linear.ts attaches terms to). */
export function krea2LoraWeights(t: Krea2Transformer): Map<string, LinearWeight> {
  const w = new Map<string, LinearWeight>([
    ['first', t.first.weight],
    ['tmlp.0', t.tmlp[0].weight],
    ['tmlp.2', t.tmlp[2].weight],
    ['tproj.1', t.tproj[1].weight],
    ['txtmlp.1', t.txtmlp[1].weight],
    ['txtmlp.3', t.txtmlp[3].weight],
    ['last.linear', t.last.linear.weight],
    ['txtfusion.projector', t.txtfusion.projector.weight],
  ]);
  const block = (p: string, b: { attn: Record<'wq' | 'wk' | 'wv' | 'gate' | 'wo', LinearWeight>; mlp: Record<'gate' | 'up' | 'down', LinearWeight> }) => {
    for (const n of ['wq', 'wk', 'wv', 'gate', 'wo'] as const) w.set(`${p}attn.${n}`, b.attn[n]);
    for (const n of ['gate', 'up', 'down'] as const) w.set(`${p}mlp.${n}`, b.mlp[n]);
  };
  t.blocks.forEach((b, i) => block(`blocks.${i}.`, b));
  t.txtfusion.layerwise_blocks.forEach((b, i) => block(`txtfusion.layerwise_blocks.${i}.`, b));
  t.txtfusion.refiner_blocks.forEach((b, i) => block(`txtfusion.refiner_blocks.${i}.`, b));
  return w;
}

/** Qwen-Image-2.1's loaded linears by module name (only the blocks the transformer loaded). */
export function qwenImage21LoraWeights(t: QwenImage21Transformer): Map<string, LinearWeight> {
  const w = new Map<string, LinearWeight>([
    ['time_text_embed.timestep_embedder.linear_1', t.time_text_embed.timestep_embedder.linear_1],
    ['time_text_embed.timestep_embedder.linear_2', t.time_text_embed.timestep_embedder.linear_2],
    ['txt_in.in_layer', t.txt_in.in_layer],
    ['txt_in.out_layer', t.txt_in.out_layer],
    ['img_in', t.img_in],
    ['modulation.1', t.modulation[1]],
    ['norm_out.linear', t.norm_out.linear],
    ['proj_out', t.proj_out],
  ]);
  t.transformer_blocks.forEach((b, i) => {
    const p = `transformer_blocks.${i}.`;
    w.set(`${p}attn.to_q`, b.attn.to_q);
    w.set(`${p}attn.to_k`, b.attn.to_k);
    w.set(`${p}attn.to_v`, b.attn.to_v);
    w.set(`${p}attn.to_out.0`, b.attn.to_out[0]);
    w.set(`${p}img_mlp.proj`, b.img_mlp.proj);
    w.set(`${p}img_mlp.gate_layer`, b.img_mlp.gate_layer);
    w.set(`${p}img_mlp.out`, b.img_mlp.out);
  });
  return w;
}
