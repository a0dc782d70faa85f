// Video latents <-> transformer rows (diffusers patchify_video_latents and the after-denoise unpack):
// latents (1, C, F, H, W) -> rows (F/pt * H/ph * W/pw, C * pt * ph * pw), rows frame-major then row-major, each
// row channel-major over its (pt, ph, pw) patch. One strided copy each way.
import type { Engine } from '../../../engine/engine';
import { contiguous } from '../../../engine/ops/elementwise';
import type { Tensor } from '../../../engine/tensor';

export function patchify(e: Engine, latents: Tensor, patch: readonly [number, number, number]): Tensor {
  const [pt, ph, pw] = patch;
  const x = latents.rank === 5 && latents.shape[0] === 1 ? latents.reshape(latents.shape.slice(1)) : latents;
  if (x.rank !== 4) throw new RangeError(`patchify: latents ${latents} must be (1, C, F, H, W)`);
  const [C, F, H, W] = x.shape as [number, number, number, number];
  if (F % pt || H % ph || W % pw) throw new RangeError(`patchify: latents ${latents} are not divisible by the patch ${patch.join('x')}`);
  const v = x.reshape([C, F / pt, pt, H / ph, ph, W / pw, pw]).permute([1, 3, 5, 0, 2, 4, 6]);
  return contiguous(e, v).reshape([(F / pt) * (H / ph) * (W / pw), C * pt * ph * pw]);
}

/** rows -> latents (1, C, F, H, W) for a latent grid `size` = (F, H, W). */
export function unpatchify(e: Engine, rows: Tensor, channels: number, size: readonly [number, number, number], patch: readonly [number, number, number]): Tensor {
  const [pt, ph, pw] = patch;
  const [F, H, W] = size;
  const n = (F / pt) * (H / ph) * (W / pw);
  if (rows.rank !== 2 || rows.shape[0] !== n || rows.shape[1] !== channels * pt * ph * pw) {
    throw new RangeError(`unpatchify: rows ${rows} must be [${n}, ${channels * pt * ph * pw}] for ${channels} channels of ${size.join('x')}`);
  }
  const v = rows.reshape([F / pt, H / ph, W / pw, channels, pt, ph, pw]).permute([3, 0, 4, 1, 5, 2, 6]);
  return contiguous(e, v).reshape([1, channels, F, H, W]);
}
