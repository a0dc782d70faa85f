"""The video demo's 8-prompt check (issue 18) on an exported checkpoint, through upstream's own pipeline: diffusers'
modular MiniMax H3 pipeline (MiniMaxH3Blocks, t2va) in float32 on the CPU, loaded as tools/golden/minimax_h3_pipeline.py
loads Kiln's demo checkpoint. For 8 prompts of the grammar (fixed seed, both beeps, every direction) at the service's
"1 s" job (39 frames, 608 x 352): the ball's colour, its direction of motion (centroid over frames) and the soundtrack's
dominant band, each against what the prompt asks (the issue asks 7 of 8 with all three right).

  $lab python3 /project/tools/train-demo/video_eval.py --checkpoint /tmp/train/h3-out [--steps 20] [--grid /tmp/x.png]

Upstream refuses clips under 5 s (MiniMaxH3ModularPipeline.min_duration); the service runs 1 s jobs, so the check lowers
that bound to 1 s (nothing else of the pipeline changes: 39 frames give 12 latent frames and 65 audio latents).
"""
import argparse
import os
import random
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "golden"))
from procedural_video import BEEPS, DIRECTIONS, FRAMES, HEIGHT, WIDTH, all_prompts, judge, prompt_of  # noqa: E402
from minimax_h3_pipeline import load_pipeline  # noqa: E402
from diffusers.modular_pipelines.minimax_h3.modular_pipeline import MiniMaxH3ModularPipeline  # noqa: E402

MiniMaxH3ModularPipeline.min_duration = property(lambda self: 1.0)


def prompts_8(seed: int = 18) -> list[tuple[str, str, str, str]]:
    rng = random.Random(seed)
    table = all_prompts()
    out = []
    for i, d in enumerate(DIRECTIONS * 2):
        beep = list(BEEPS)[i % 2]
        out.append(rng.choice([p for p in table if p[1] == d and p[3] == beep and p[0] not in [q[0] for q in out]]))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--processor-extra", default="/upstream/proc")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--grid", help="a png of frames 0, 19 and 38 of every clip")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    pipe = load_pipeline(a.checkpoint, a.processor_extra, torch.float32)
    score = 0
    rows = []
    for k, (c, d, b, s) in enumerate(prompts_8()):
        g = torch.Generator().manual_seed(a.seed + k)
        latents = torch.randn((1, 24, 12, HEIGHT // 16, WIDTH // 16), generator=g)
        audio_latents = torch.randn((2, 32, 65), generator=g)
        with torch.no_grad():
            st = pipe(prompt=prompt_of(c, d, b, s), height=HEIGHT, width=WIDTH, num_frames=FRAMES,
                      num_inference_steps=a.steps, latents=latents, audio_latents=audio_latents, output_type="pt")
        video = (st.get("videos")[0].permute(0, 2, 3, 1).numpy() * 255).round().astype(np.uint8)
        audio = st.get("audio")[0].numpy()
        j = judge(video, audio, 32000)
        ok = j["ball"] == c and j["direction"] == d and j["beep"] == s
        score += ok
        print(f"{'OK ' if ok else 'no '} {prompt_of(c, d, b, s)!r}: {j}", flush=True)
        rows.append(video[[0, len(video) // 2, -1]])
    print(f"score {score} / 8 (ball colour, direction and beep all right), {a.steps} steps")
    if a.grid:
        from PIL import Image
        small = [[Image.fromarray(f).resize((WIDTH // 4, HEIGHT // 4)) for f in r] for r in rows]
        sheet = Image.new("RGB", (WIDTH // 4 * 3, HEIGHT // 4 * len(rows)), "white")
        for i, r in enumerate(small):
            for j, im in enumerate(r):
                sheet.paste(im, (j * WIDTH // 4, i * HEIGHT // 4))
        sheet.save(a.grid)


if __name__ == "__main__":
    main()
