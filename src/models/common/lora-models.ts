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
import { h3LoraModules, krea2LoraModules, qwenImage21LoraModules, type H3LoraDims, type LoraModelNames } from '../../catalog/loras';
import type { Krea2Config } from '../krea2/config';
import { KREA2_FUSION_BLOCKS } from '../krea2/config';
import type { Krea2Transformer } from '../krea2/transformer';
import { videoPatchDim, type H3Config } from '../minimax_h3/transformer/config';
import type { MiniMaxH3Transformer } from '../minimax_h3/transformer/transformer';
import type { QwenImage21Config } from '../qwen_image21/config';
import type { QwenImage21Transformer } from '../qwen_image21/transformer';
import type { LinearWeight } from './weights';
import type { LoraSite } from './lora-linear';
import { isHostLinear } from '../minimax_h3/transformer/blocks';

// The tables themselves are the catalog's (catalog/loras.ts), so the API checks a file against them too.

/** Krea 2's LoRA-able linears for `cfg` (every linear of the DiT, its text fusion and its text projection). */
export function krea2LoraNames(cfg: Krea2Config): LoraModelNames {
  return krea2LoraModules({ ...cfg, fusionBlocks: KREA2_FUSION_BLOCKS });
}

/** Qwen-Image-2.1's LoRA-able linears for `cfg` (Kiln's names are diffusers' own). */
export function qwenImage21LoraNames(cfg: QwenImage21Config): LoraModelNames {
  return qwenImage21LoraModules(cfg);
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

/** MiniMax H3's LoRA-module sizes from its config (what a video worker reports: ServedSummary.lora). */
export function h3LoraDims(c: H3Config): H3LoraDims {
  const { hiddenSize, numHeads, headDim, numLayers, numRefinerLayers, ffnDim, textDim, audioInChannels, freqDim, timeEmbedHiddenDim, timeEmbedDim } = c;
  return { hiddenSize, numHeads, headDim, numLayers, numRefinerLayers, ffnDim, textDim, patchDim: videoPatchDim(c), audioInChannels, freqDim, timeEmbedHiddenDim, timeEmbedDim };
}

/** MiniMax H3's LoRA-able linears for `cfg` (Kiln's names are its diffusers checkpoint's keys; catalog/loras.ts). */
export function h3LoraNames(cfg: H3Config): LoraModelNames {
  return h3LoraModules(h3LoraDims(cfg));
}

/**
 * MiniMax H3's loaded linears by module name. The blocks' weights may live in host memory (block offload,
 * transformer.ts offloadBlocks): the LinearWeight objects stay the same while their bytes come and go
 * (engine/host-held.ts), and the LoRA terms are separate tensors that stay on the GPU, so a term attached here applies
 * to a block whichever copy of its weight is uploaded. The blocks' adaln_proj.linear kept in host memory (the default:
 * streamed through one staging buffer to build the AdaLN tables, adaln.ts) is a LoraSite keyed by its HostLinear,
 * which adaln.ts runs the staged weight with (lora-linear.ts linearAt).
 */
export function h3LoraWeights(t: MiniMaxH3Transformer): Map<string, LinearWeight | LoraSite> {
  const w = new Map<string, LinearWeight | LoraSite>([
    ['proj_in', t.proj_in.weight],
    ['audio_proj_in', t.audio_proj_in.weight],
    ['context_embedder', t.context_embedder.weight],
    ['time_embedder.linear_1', t.time_embedder.linear_1.weight],
    ['time_embedder.linear_2', t.time_embedder.linear_2.weight],
    ['norm_out.linear', t.norm_out.linear.weight],
    ['proj_out', t.proj_out.weight],
    ['audio_proj_out', t.audio_proj_out.weight],
  ]);
  const block = (p: string, b: { attn: { to_q: LinearWeight; to_k: LinearWeight; to_v: LinearWeight; to_out: readonly [LinearWeight] }; ff: { net: { 0: { proj: LinearWeight }; 2: LinearWeight } } }) => {
    w.set(`${p}attn.to_q`, b.attn.to_q);
    w.set(`${p}attn.to_k`, b.attn.to_k);
    w.set(`${p}attn.to_v`, b.attn.to_v);
    w.set(`${p}attn.to_out.0`, b.attn.to_out[0]);
    w.set(`${p}ff.net.0.proj`, b.ff.net[0].proj);
    w.set(`${p}ff.net.2`, b.ff.net[2]);
  };
  t.token_refiner.refiner_blocks.forEach((b, i) => block(`token_refiner.refiner_blocks.${i}.`, b));
  t.transformer_blocks.forEach((b, i) => {
    block(`transformer_blocks.${i}.`, b);
    const proj = b.adaln_proj.linear;
    w.set(`transformer_blocks.${i}.adaln_proj.linear`, isHostLinear(proj) ? { key: proj, shape: [proj.host.N, proj.host.K], dtype: proj.host.scaleDtype } : proj.weight);
  });
  return w;
}
