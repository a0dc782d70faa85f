// The sizes a Qwen3-VL checkpoint's tensor shapes show, in transformers' names (a ComfyUI text-encoder file mapped by
// engine/comfy-keys.ts comfyQwenVlRename), to be held against a known config's: how Krea 2's and Qwen-Image-2.1's
// ComfyUI loaders (krea2/comfy-parts.ts, qwen_image21/comfy-parts.ts) pick a config for a file that carries none.
import type { Checkpoint } from '../../engine/safetensors';

/** hidden_size, num_hidden_layers, intermediate_size, q_rows, kv_rows, head_dim, vision_depth, vision_hidden; -1 (or
 * 0 layers/blocks) where the file has no such tensor. */
export function qwen3VlShapeSizes(ck: Checkpoint): Record<string, number> {
  const rows = (k: string) => (ck.has(k) ? ck.entry(k).shape[0]! : -1);
  const count = (re: RegExp) => new Set(ck.keys().map((k) => re.exec(k)?.[1]).filter((x) => x !== undefined)).size;
  const t = 'model.language_model.';
  return {
    hidden_size: ck.has(`${t}embed_tokens.weight`) ? ck.entry(`${t}embed_tokens.weight`).shape[1]! : -1,
    num_hidden_layers: count(/^model\.language_model\.layers\.(\d+)\./),
    intermediate_size: rows(`${t}layers.0.mlp.gate_proj.weight`),
    q_rows: rows(`${t}layers.0.self_attn.q_proj.weight`),
    kv_rows: rows(`${t}layers.0.self_attn.k_proj.weight`),
    head_dim: rows(`${t}layers.0.self_attn.q_norm.weight`),
    vision_depth: count(/^model\.visual\.blocks\.(\d+)\./),
    vision_hidden: rows('model.visual.patch_embed.proj.weight'),
  };
}
