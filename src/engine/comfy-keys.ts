// ComfyUI's key names in single-file checkpoints. ComfyUI saves a diffusion model's state dict under the prefix of the
// module that holds it (`model.diffusion_model.`, from its BaseModel; some repacks `diffusion_model.`), and strips
// whichever such prefix most keys carry when it loads a diffusion_models/ file (model_detection's
// unet_prefix_from_state_dict, then state_dict_prefix_replace in sd.py's load_diffusion_model_state_dict). Below the
// prefix the names are those of ComfyUI's module for the model, which for the models Kiln runs are the upstream names
// its loaders read: Krea 2's SingleStreamDiT (comfy/ldm/krea2/model.py: first, blocks.N.{mod.lin, prenorm.scale,
// attn.wq/wk/wv/gate/wo, attn.qknorm.qnorm.scale, mlp.gate/up/down}, tmlp, tproj, txtfusion, txtmlp, last) and
// MiniMax H3's native MiniMaxH3DiTModel (comfy/ldm/minimax/model.py; src/models/minimax_h3/transformer/
// native-checkpoint.ts presents those under the diffusers names). So a loader reads a ComfyUI file with the prefix
// this returns and no other mapping; fp8 "scaled" files' scales carry the same prefix (fp8-scaled.ts finds them).

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
