// MiniMax H3's preview frames (models/minimax_h3/preview.ts, issue 46): the first, middle and last latent frames of
// the generated rows, read one patch group of rows at a time, give exactly the pictures of those frames of the whole
// latent (unpatchified on the CPU here, as patchify.ts lays rows out), for the released patch (1, 2, 2) and a patch
// that spans frames (2, 2, 2).
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { Engine } from '../../src/engine/engine';
import { projectLatents, type LatentProjection } from '../../src/models/common/latent-preview';
import { h3PreviewFrames } from '../../src/models/minimax_h3/preview';

let engine: Promise<Engine> | undefined;
const getEngine = () => (engine ??= Engine.create({ debug: true, allowSoftware: true }));
after(async () => (await engine)?.shutdown());

/** Rows (frame-major, then row-major; each row channel-major over its patch) of latents [C][T][H][W]. */
function rowsOf(lat: Float32Array, C: number, [T, H, W]: [number, number, number], [pt, ph, pw]: [number, number, number]): Float32Array {
  const cols = C * pt * ph * pw;
  const out = new Float32Array(lat.length);
  for (let c = 0; c < C; c++) {
    for (let t = 0; t < T; t++) {
      for (let y = 0; y < H; y++) {
        for (let x = 0; x < W; x++) {
          const row = (Math.floor(t / pt) * (H / ph) + Math.floor(y / ph)) * (W / pw) + Math.floor(x / pw);
          const col = ((c * pt + (t % pt)) * ph + (y % ph)) * pw + (x % pw);
          out[row * cols + col] = lat[((c * T + t) * H + y) * W + x]!;
        }
      }
    }
  }
  return out;
}

for (const patch of [[1, 2, 2], [2, 2, 2]] as [number, number, number][]) {
  test(`patch ${patch.join('x')}: the first, middle and last frames of random latents, exactly`, async () => {
    const e = await getEngine();
    const C = 5;
    const dims: [number, number, number] = [6, 4, 6];
    const [T, H, W] = dims;
    const lat = Float32Array.from({ length: C * T * H * W }, () => Math.random() * 4 - 2);
    const p: LatentProjection = { channels: C, weights: Float32Array.from({ length: 3 * C }, () => Math.random() * 80 - 40), bias: Float32Array.from([128, 120, 110]) };
    const x0 = e.upload(rowsOf(lat, C, dims, patch), [(T / patch[0]) * (H / patch[1]) * (W / patch[2]), C * patch[0] * patch[1] * patch[2]], 'f32');
    try {
      const got = await h3PreviewFrames(e, x0, { channels: C, dims, patch }, p);
      const want = [0, Math.floor((T - 1) / 2), T - 1].map((t) => {
        const cells = new Float32Array(H * W * C);
        for (let c = 0; c < C; c++) for (let i = 0; i < H * W; i++) cells[i * C + c] = lat[(c * T + t) * H * W + i]!;
        return projectLatents(p, cells, H, W);
      });
      assert.deepEqual(got, want);
    } finally {
      x0.free();
    }
  });
}
