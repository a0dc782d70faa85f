// Every tensor of the vision tower in the checkpoint, with its shape: for writing demo checkpoints in the real
// format (a tiny random Qwen3-VL) and for checking a folder before loading it.
import type { Qwen3VlVisionConfig } from './config';

/** Key (with the config's "model.visual." prefix) -> shape, in the order the tower uses them. */
export function qwen3VlVisionShapes(cfg: Qwen3VlVisionConfig, prefix = cfg.keyPrefix): Map<string, number[]> {
  const { hiddenSize: h, intermediateSize: f, inChannels: C, temporalPatchSize: T, patchSize: p, outHiddenSize: out } = cfg;
  const wide = h * cfg.spatialMergeSize ** 2;
  const s = new Map<string, number[]>();
  const lin = (k: string, n: number, k2: number) => {
    s.set(`${k}.weight`, [n, k2]);
    s.set(`${k}.bias`, [n]);
  };
  const norm = (k: string, n: number) => {
    s.set(`${k}.weight`, [n]);
    s.set(`${k}.bias`, [n]);
  };
  s.set(`${prefix}patch_embed.proj.weight`, [h, C, T, p, p]);
  s.set(`${prefix}patch_embed.proj.bias`, [h]);
  s.set(`${prefix}pos_embed.weight`, [cfg.numPositionEmbeddings, h]);
  for (let i = 0; i < cfg.depth; i++) {
    const b = `${prefix}blocks.${i}.`;
    norm(`${b}norm1`, h);
    lin(`${b}attn.qkv`, 3 * h, h);
    lin(`${b}attn.proj`, h, h);
    norm(`${b}norm2`, h);
    lin(`${b}mlp.linear_fc1`, f, h);
    lin(`${b}mlp.linear_fc2`, h, f);
  }
  const merger = (m: string, postShuffle: boolean) => {
    norm(`${m}norm`, postShuffle ? wide : h);
    lin(`${m}linear_fc1`, wide, wide);
    lin(`${m}linear_fc2`, out, wide);
  };
  merger(`${prefix}merger.`, false);
  cfg.deepstackVisualIndexes.forEach((_, k) => merger(`${prefix}deepstack_merger_list.${k}.`, true));
  return s;
}
