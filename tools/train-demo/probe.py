"""What a demo Qwen-Image-2.1 checkpoint predicts from a noisy picture, per sigma (issue 18's training diagnosis).

For a few prompts of the grammar: the procedural picture, then the decoded x0 prediction x_s - s * v at s = 1.0 (pure
noise in: the model must draw E[x0 | text] from the text alone), 0.7, 0.4 and 0.1, one row a prompt; prints the
prediction's latent MSE per sigma. A checkpoint that draws the shape from s = 0.7 down but not at s = 1.0 can find a
shape in its input but cannot place one from the text: sampling, which starts at s = 1, then grows the noise's
blobs (docs/models/demo.md, "What the training runs showed").

  lab="bash /work/shared/tools/reflab/run.sh -u diffusers=/opt/upstream/diffusers-qi21/src \\
      -u proc=/work/shared/upstream/minimax-h3/processor --"
  $lab python3 /project/tools/train-demo/probe.py --ckpt /tmp/train/qi21/checkpoint --out /tmp/train/probe.png
"""
import argparse
import os
import sys

import torch
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "golden"))
from procedural import draw, prompt_of, to_tensor_np  # noqa: E402
from qwen_image21_pipeline import load_pipeline  # noqa: E402

from diffusers.pipelines.qwenimage21.pipeline_qwenimage21 import QwenImage21Pipeline  # noqa: E402

PROMPTS = [("red", "circle", None, "white"), ("blue", "square", "left", "yellow"), ("orange", "triangle", None, "green")]
SIGMAS = (1.0, 0.7, 0.4, 0.1)


@torch.no_grad()
def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", required=True, help="a checkpoint folder in the published layout (f32 or bf16)")
    ap.add_argument("--out", required=True, help="the png: one row a prompt, the picture then one column a sigma")
    ap.add_argument("--processor-extra", default="/upstream/proc")
    ap.add_argument("--size", type=int, default=256)
    a = ap.parse_args()
    torch.set_num_threads(1)
    pipe = load_pipeline(a.ckpt, a.processor_extra, torch.float32)
    vae, tr = pipe.vae, pipe.transformer
    C = tr.config.in_channels
    mean = torch.tensor(vae.config.latents_mean).view(1, C, 1, 1, 1)
    std = torch.tensor(vae.config.latents_std).view(1, C, 1, 1, 1)
    h = w = a.size // 16
    rows = []
    for spec in PROMPTS:
        prompt = prompt_of(*spec)
        img = torch.from_numpy(to_tensor_np(draw(*spec, a.size, a.size)))[None, :, None]  # (1, 4, 1, S, S)
        x0 = QwenImage21Pipeline._pack_latents((vae.encode(img).latent_dist.mode() - mean) / std, 1, C, h, w)
        enc, _, _ = pipe._get_qwen_prompt_embeds([prompt], None, torch.device("cpu"))
        noise = torch.randn(x0.shape, generator=torch.Generator().manual_seed(0))
        # the joint sequence's slots: the text rows, then the target's h * w / 4 (4 tokens a slot)
        slots = torch.cat([torch.zeros(1, enc.shape[1], dtype=torch.bool), torch.ones(1, h * w // 4, dtype=torch.bool)], 1)
        row = [img[0, :3, 0]]
        for s in SIGMAS:
            xs = (1 - s) * x0 + s * noise
            v = tr(hidden_states=xs, timestep=torch.tensor([s]), encoder_hidden_states=enc, encoder_hidden_states_mask=None,
                   img_shapes=[[(1, h, w)]], img_mask=slots, return_dict=False)[0][:, -h * w:]
            pred = xs - s * v
            print(f"{prompt}: sigma {s} x0 mse {float(((pred - x0) ** 2).mean()):.4f}")
            lat = pipe._unpack_latents(pred, a.size, a.size, 16) * std + mean
            row.append(vae.decode(lat, return_dict=False)[0][0, :3, 0])
        rows.append(torch.cat(row, dim=2))
    grid = torch.cat(rows, dim=1)
    Image.fromarray(((grid.clamp(-1, 1) + 1) * 127.5).byte().permute(1, 2, 0).numpy()).resize((grid.shape[2] // 2, grid.shape[1] // 2)).save(a.out)


if __name__ == "__main__":
    main()
