// ComfyUI's key names in single-file checkpoints. ComfyUI saves a diffusion model's state dict under the prefix of the
// module that holds it (`model.diffusion_model.`, from its BaseModel; some repacks `diffusion_model.`), and strips
// whichever such prefix most keys carry when it loads a diffusion_models/ file (model_detection's
// unet_prefix_from_state_dict, then state_dict_prefix_replace in sd.py's load_diffusion_model_state_dict). Below the
// prefix the names are those of ComfyUI's module for the model, which for the models Kiln runs are the upstream names
// its loaders read: Krea 2's SingleStreamDiT (comfy/ldm/krea2/model.py: first, blocks.N.{mod.lin, prenorm.scale,
// attn.wq/wk/wv/gate/wo, attn.qknorm.qnorm.scale, mlp.gate/up/down}, tmlp, tproj, txtfusion, txtmlp, last) and
// MiniMax H3's native MiniMaxH3DiTModel (comfy/ldm/minimax/model.py; src/models/minimax_h3/transformer/
// native-checkpoint.ts presents those under the diffusers names). So a loader reads a ComfyUI file with the prefix
// this returns and no other mapping (but Qwen-Image-2.1's fused SwiGLU weight: comfyQwenImage21DitRename); fp8
// "scaled" files' scales carry the same prefix (fp8-scaled.ts finds them).

import type { RowPart } from './safetensors';

/** The prefixes ComfyUI puts before a diffusion model's own key names, most specific first. */
export const COMFY_DIFFUSION_PREFIXES = ['model.diffusion_model.', 'diffusion_model.'] as const;

/** The diffusion-model prefix the keys carry ('' when none): the candidate most keys start with, as ComfyUI picks it,
 * and only where it is on more than half of them (a whole-checkpoint file's VAE and text encoder keys are not). */
export function comfyDiffusionPrefix(keys: readonly string[]): string {
  let best = '';
  let bestCount = 0;
  for (const p of COMFY_DIFFUSION_PREFIXES) {
    const n = keys.reduce((a, k) => a + (k.startsWith(p) ? 1 : 0), 0);
    if (n > bestCount) {
      best = p;
      bestCount = n;
    }
  }
  return bestCount * 2 > keys.length ? best : '';
}

/** A ComfyUI file's keys fit no layout Kiln reads; the message names the file, what was expected and what was found. */
export class ComfyKeysError extends Error {
  override readonly name = 'ComfyKeysError';
}

/** A tensor name -> the name a Kiln loader reads, null for one it never reads, or row ranges read as tensors of their
 * own (a fused weight read as its parts: safetensors.ts RowPart). */
export type KeyRename = (key: string) => string | null | RowPart[];

const sample = (keys: readonly string[]) => keys.slice(0, 4).map((k) => JSON.stringify(k)).join(', ') + (keys.length > 4 ? `, ... (${keys.length} keys)` : '');

// ---- Qwen-Image-2.1's transformer ----
// ComfyUI's QwenImage21Transformer2DModel (comfy/ldm/qwen_image21/model.py) keeps diffusers' module names
// (time_text_embed.timestep_embedder.linear_1/2, txt_in.{text_norm, in_layer, out_layer}, img_in, modulation.1,
// transformer_blocks.N.attn.{to_q, to_k, to_v, to_out.0, norm_q, norm_k}, transformer_blocks.N.img_mlp.out, norm_out.linear,
// proj_out) with one difference: its SwiGLU may hold the gate and up projections as one fused weight,
// img_mlp.gate_up [2 * mlp, dim] = [gate_layer; proj] (its fused_mlp, the default), besides the split gate_layer and
// proj of a diffusers file. Everything sits under the diffusion-model prefix (model.diffusion_model., or none).

/** Every weight name of a Qwen-Image-2.1 transformer (diffusers' names; img_mlp.gate_up is ComfyUI's fused form). */
const QWEN_IMAGE21_DIT_KEY = new RegExp(
  '^(?:(?:img_in|proj_out|norm_out\\.linear|txt_in\\.(?:in_layer|out_layer|text_norm)|time_text_embed\\.timestep_embedder\\.linear_[12]|modulation\\.1)'
    + '|transformer_blocks\\.\\d+\\.(?:attn\\.(?:to_q|to_k|to_v|to_out\\.0|norm_q|norm_k)|img_mlp\\.(?:gate_layer|proj|out|gate_up)))\\.weight$',
);
/** Tensors a ComfyUI file carries beside the weights: fp8 scales (applied at open, fp8-scaled.ts), quantisation markers. */
const COMFY_SIDE_TENSOR = /(?:^|\.)(?:scaled_fp8|scale_weight|weight_scale|scale_input|input_scale|comfy_quant)$/;

/** The rename from a Qwen-Image-2.1 transformer file's keys (ComfyUI's or diffusers') to the names Kiln's loader
 * reads: the prefix dropped, a fused img_mlp.gate_up read as gate_layer (its first half of rows) and proj (the second).
 * `rows(key)` is a tensor's first dimension. Keys of no Qwen-Image-2.1 transformer (a control branch, another model)
 * and integer-quantised weights (ComfyUI's int8 or nvfp4 formats) are refused by name. */
export function comfyQwenImage21DitRename(keys: readonly string[], dtype: (key: string) => string, rows: (key: string) => number, path: string): KeyRename {
  const prefix = comfyDiffusionPrefix(keys);
  const own = (k: string) => (k.startsWith(prefix) ? k.slice(prefix.length) : k);
  if (!keys.some((k) => own(k) === 'img_in.weight') || !keys.some((k) => own(k) === 'transformer_blocks.0.attn.to_q.weight')) {
    throw new ComfyKeysError(`${path}: not a Qwen-Image-2.1 transformer: expected img_in.weight, txt_in.in_layer.weight, transformer_blocks.N.attn.to_q.weight, ... (under model.diffusion_model. or no prefix), found ${sample(keys)}`);
  }
  const unknown = keys.filter((k) => !QWEN_IMAGE21_DIT_KEY.test(own(k)) && !COMFY_SIDE_TENSOR.test(k));
  if (unknown.length) throw new ComfyKeysError(`${path}: tensors no Qwen-Image-2.1 transformer has (a control branch or another model's?): ${sample(unknown)}`);
  const quantised = keys.filter((k) => QWEN_IMAGE21_DIT_KEY.test(own(k)) && /^(I8|U8|I4|U4)$/.test(dtype(k)));
  if (quantised.length) throw new ComfyKeysError(`${path}: ${quantised.length} weights are ${dtype(quantised[0]!)} (ComfyUI's integer-quantised formats, e.g. ${JSON.stringify(quantised[0])}), which Kiln does not read; use the bf16, fp16 or fp8 (scaled) file`);
  return (k) => {
    if (COMFY_SIDE_TENSOR.test(k)) return null;
    const n = own(k);
    const fused = /^(transformer_blocks\.\d+\.img_mlp\.)gate_up\.weight$/.exec(n);
    if (!fused) return n;
    const r = rows(k);
    if (r % 2 !== 0) throw new ComfyKeysError(`${path}: "${k}" has ${r} rows; a fused [gate; up] weight has an even number`);
    return [{ name: `${fused[1]}gate_layer.weight`, rows: [0, r / 2] }, { name: `${fused[1]}proj.weight`, rows: [r / 2, r] }];
  };
}

// ---- text encoders of the Qwen-VL family ----
// ComfyUI keeps a Qwen-VL text encoder (text_encoders/, e.g. Comfy-Org's qwen_2.5_vl_7b_fp8_scaled.safetensors, the
// Qwen3-VL ones) as its own modules save it: the decoder under its Llama2_ module `model.` (model.embed_tokens,
// model.layers.N.{self_attn.{q,k,v,o}_proj, self_attn.{q,k}_norm, mlp.{gate,up,down}_proj, input_layernorm,
// post_attention_layernorm}, model.norm: comfy/text_encoders/llama.py) and the vision tower under `visual.` with
// transformers' own sub-names (patch_embed.proj, pos_embed, blocks.N.{norm1, norm2, attn.qkv, attn.proj,
// mlp.linear_fc1/2}, merger., deepstack_merger_list.N.: qwen35.py, qwen3vl.py). transformers' Qwen3-VL checkpoints,
// which Kiln's loaders read, put the same tensors under model.language_model. and model.visual.; a file already in
// that layout is read as it is. fp8 scales (`<layer>.scale_weight`) were applied at open under the file's names.

/** The rename from a Qwen-VL text encoder file's keys to transformers' (model.language_model., model.visual.). */
export function comfyQwenVlRename(keys: readonly string[], path: string): KeyRename {
  if (keys.some((k) => k.startsWith('model.language_model.'))) return (k) => k; // transformers' own layout
  if (!keys.some((k) => k.startsWith('model.layers.') || k === 'model.embed_tokens.weight')) {
    throw new ComfyKeysError(`${path}: not a Qwen-VL text encoder Kiln can read: expected ComfyUI's keys (model.embed_tokens.weight, model.layers.N..., visual.blocks.N...) or transformers' (model.language_model.layers.N..., model.visual...), found ${sample(keys)}`);
  }
  return (k) => {
    if (k.startsWith('model.visual.')) return k;
    if (k.startsWith('visual.')) return `model.${k}`;
    if (k.startsWith('model.')) return `model.language_model.${k.slice('model.'.length)}`;
    return k; // lm_head.weight, the scaled_fp8 marker: under their own names (the loaders do not ask for them)
  };
}

// ---- the Wan 2.1 VAE (the Qwen-Image VAE) ----
// ComfyUI keeps the Qwen-Image VAE (vae/qwen_image_vae.safetensors) in the original Wan 2.1 VAE's names
// (comfy/ldm/wan/vae.py WanVAE): encoder/decoder.conv1, .middle.{0 resnet, 1 attention, 2 resnet}, .head.{0 norm,
// 2 conv}; encoder.downsamples.N and decoder.upsamples.N as one flat list (per decoder level num_res_blocks + 1
// ResidualBlocks, then a Resample but after the last level); a ResidualBlock's residual.{0 norm, 2 conv, 3 norm,
// 6 conv} and shortcut; top-level conv1 (quant) and conv2 (post-quant). diffusers' AutoencoderKLQwenImage, whose names
// Kiln's decoder reads, groups the decoder's list into up_blocks.L.{resnets.j, upsamplers.0} and renames the rest.

const RESIDUAL: [RegExp, string][] = [[/^residual\.0\./, 'norm1.'], [/^residual\.2\./, 'conv1.'], [/^residual\.3\./, 'norm2.'], [/^residual\.6\./, 'conv2.'], [/^shortcut\./, 'conv_shortcut.']];

function residual(rest: string): string | null {
  for (const [re, to] of RESIDUAL) if (re.test(rest)) return rest.replace(re, to);
  return null;
}

/** The rename from a VAE file's keys to diffusers' AutoencoderKLQwenImage names: Wan's names mapped, diffusers' own
 * kept; ComfyUI's `first_stage_model.` / `vae.` prefix (a whole-checkpoint file's VAE part) dropped first. */
export function comfyWanVaeRename(keys: readonly string[], path: string): KeyRename {
  const prefix = ['first_stage_model.', 'vae.'].find((p) => keys.some((k) => k.startsWith(`${p}decoder.`))) ?? '';
  const own = keys.filter((k) => k.startsWith(prefix)).map((k) => k.slice(prefix.length));
  if (own.some((k) => k.startsWith('decoder.up_blocks.'))) return (k) => (k.startsWith(prefix) ? k.slice(prefix.length) : null);
  if (!own.includes('decoder.conv1.weight') || !own.some((k) => k.startsWith('decoder.upsamples.'))) {
    throw new ComfyKeysError(`${path}: not a Qwen-Image (Wan 2.1) VAE Kiln can read: expected ComfyUI's keys (decoder.conv1, decoder.middle.N, decoder.upsamples.N, conv2) or diffusers' (decoder.conv_in, decoder.mid_block, decoder.up_blocks.N, post_quant_conv), found ${sample(keys)}`);
  }
  // a decoder level is num_res_blocks + 1 resnets and its Resample: the first Resample's index + 1 entries
  const firstUp = Math.min(...own.filter((k) => /^decoder\.upsamples\.\d+\.resample\./.test(k)).map((k) => Number(k.split('.')[2])));
  if (!Number.isFinite(firstUp)) throw new ComfyKeysError(`${path}: decoder.upsamples has no Resample (decoder.upsamples.N.resample.1): not a Wan 2.1 VAE`);
  const per = firstUp + 1;
  const map = (k: string): string | null => {
    if (k === 'conv1.weight' || k === 'conv1.bias') return `quant_conv.${k.slice(6)}`;
    if (k === 'conv2.weight' || k === 'conv2.bias') return `post_quant_conv.${k.slice(6)}`;
    const m = /^(encoder|decoder)\.(.*)$/.exec(k);
    if (!m) return null;
    const [, side, rest] = m as unknown as [string, string, string];
    if (rest.startsWith('conv1.')) return `${side}.conv_in.${rest.slice(6)}`;
    if (rest.startsWith('head.0.')) return `${side}.norm_out.${rest.slice(7)}`;
    if (rest.startsWith('head.2.')) return `${side}.conv_out.${rest.slice(7)}`;
    let g = /^middle\.(\d+)\.(.*)$/.exec(rest);
    if (g) {
      const [i, sub] = [Number(g[1]), g[2]!];
      if (i === 1) return `${side}.mid_block.attentions.0.${sub}`;
      const r = residual(sub);
      return r === null ? null : `${side}.mid_block.resnets.${i === 0 ? 0 : 1}.${r}`;
    }
    g = /^downsamples\.(\d+)\.(.*)$/.exec(rest);
    if (g && side === 'encoder') {
      const sub = g[2]!;
      const r = sub.startsWith('resample.') || sub.startsWith('time_conv.') ? sub : residual(sub);
      return r === null ? null : `encoder.down_blocks.${g[1]}.${r}`;
    }
    g = /^upsamples\.(\d+)\.(.*)$/.exec(rest);
    if (g && side === 'decoder') {
      const n = Number(g[1]);
      const [level, j, sub] = [Math.floor(n / per), n % per, g[2]!];
      if (j === per - 1) return sub.startsWith('resample.') || sub.startsWith('time_conv.') ? `decoder.up_blocks.${level}.upsamplers.0.${sub}` : null;
      const r = residual(sub);
      return r === null ? null : `decoder.up_blocks.${level}.resnets.${j}.${r}`;
    }
    return null;
  };
  return (k) => {
    if (!k.startsWith(prefix)) return null;
    const own = k.slice(prefix.length);
    const n = map(own);
    if (n === null && (own.startsWith('decoder.') || own.startsWith('conv2.'))) throw new ComfyKeysError(`${path}: "${k}" is no part of a Wan 2.1 VAE decoder Kiln knows`);
    return n;
  };
}
