// Latent <-> patch tokens (krea-ai/krea-2 sampling.prepare and the end of sampling.sample):
//   (B, C, H, W) -> (B, (H/p)(W/p), C p p), tokens row-major over the patch grid, feature c p^2 + ph p + pw
// Host-side: the sampler draws its noise on the host and the VAE gets the unpatchified result once per job.

export interface LatentShape {
  batch: number;
  channels: number;
  height: number;
  width: number;
}

function check(s: LatentShape, patch: number, n: number, what: string): void {
  if (s.height % patch !== 0 || s.width % patch !== 0) throw new RangeError(`krea2 ${what}: latent ${s.height}x${s.width} is not a multiple of patch ${patch}`);
  if (n !== s.batch * s.channels * s.height * s.width) throw new RangeError(`krea2 ${what}: ${n} values for a (${s.batch}, ${s.channels}, ${s.height}, ${s.width}) latent`);
}

export function krea2Patchify(latent: ArrayLike<number>, s: LatentShape, patch: number): Float32Array {
  check(s, patch, latent.length, 'patchify');
  const { batch: B, channels: C, height: H, width: W } = s;
  const gh = H / patch;
  const gw = W / patch;
  const F = C * patch * patch;
  const out = new Float32Array(latent.length);
  for (let b = 0; b < B; b++) {
    for (let c = 0; c < C; c++) {
      for (let y = 0; y < H; y++) {
        for (let x = 0; x < W; x++) {
          const token = Math.floor(y / patch) * gw + Math.floor(x / patch);
          const f = c * patch * patch + (y % patch) * patch + (x % patch);
          out[(b * gh * gw + token) * F + f] = latent[((b * C + c) * H + y) * W + x]!;
        }
      }
    }
  }
  return out;
}

export function krea2Unpatchify(tokens: ArrayLike<number>, s: LatentShape, patch: number): Float32Array {
  check(s, patch, tokens.length, 'unpatchify');
  const { batch: B, channels: C, height: H, width: W } = s;
  const gw = W / patch;
  const gh = H / patch;
  const F = C * patch * patch;
  const out = new Float32Array(tokens.length);
  for (let b = 0; b < B; b++) {
    for (let c = 0; c < C; c++) {
      for (let y = 0; y < H; y++) {
        for (let x = 0; x < W; x++) {
          const token = Math.floor(y / patch) * gw + Math.floor(x / patch);
          const f = c * patch * patch + (y % patch) * patch + (x % patch);
          out[((b * C + c) * H + y) * W + x] = tokens[(b * gh * gw + token) * F + f]!;
        }
      }
    }
  }
  return out;
}
