"""Golden vectors for src/models/minimax_h3/conditioning/condition-rows.ts: the visual conditioning rows (diffusers
MiniMaxH3PrepareConditionLatentsStep.__call__ at 58eb52c0, run with its block plumbing stubbed and the real
MiniMaxH3Scheduler): each condition noised to t = 0.999 with a draw from the request generator, patchified, in packed
order.

Run in the reference lab:
  bash ../shared/tools/reflab/run.sh -u diffusers=/opt/upstream/diffusers/src -- \
    python3 /project/tools/golden/minimax_h3_conditions.py --out /project/test/fixtures/golden
Writes minimax_h3/conditions/<case>.safetensors: input.condition_<i> [1, C, T, h, w] normalised latents,
input.noise_<i> the generator's draw for it (the same torch.randn calls on a second generator with the seed, checked
equal to what the step consumed), output.condition_rows; config {seed, patch_size, keyframe_noise_aug}.
"""
import argparse
import os
import sys
from types import SimpleNamespace

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import diffusers_upstream, write_case  # noqa: E402

from diffusers.modular_pipelines.minimax_h3.before_denoise import MiniMaxH3PrepareConditionLatentsStep  # noqa: E402
from diffusers.schedulers import MiniMaxH3Scheduler  # noqa: E402

MODEL, COMPONENT = "minimax_h3", "conditions"


def case(name, seed, shapes):
    gen = torch.Generator().manual_seed(seed + 1000)
    conditions = [torch.randn(1, *s, generator=gen) * 1.5 for s in shapes]
    rows = sum(s[1] * (s[2] // 2) * (s[3] // 2) for s in shapes)
    state = SimpleNamespace(generator=torch.Generator().manual_seed(seed), num_condition_video_rows=rows,
                            condition_latents=conditions)
    step = MiniMaxH3PrepareConditionLatentsStep()
    step.get_block_state = lambda _s: state
    step.set_block_state = lambda _s, _bs: None
    comps = SimpleNamespace(_execution_device="cpu", patch_size=(1, 2, 2), scheduler=MiniMaxH3Scheduler(),
                            keyframe_noise_aug=0.999)
    step.__call__(comps, None)
    g2 = torch.Generator().manual_seed(seed)
    noises = [torch.randn(c.shape, generator=g2, dtype=torch.float32) for c in conditions]
    if not torch.equal(g2.get_state(), state.generator.get_state()):
        raise SystemExit(f"{name}: the replayed draws did not consume the generator as the step did")
    inputs = {f"condition_{i}": c for i, c in enumerate(conditions)}
    inputs.update({f"noise_{i}": n for i, n in enumerate(noises)})
    write_case(ARGS.out, MODEL, COMPONENT, name, weights={}, inputs=inputs, outputs={"condition_rows": state.condition_rows},
               config={"seed": seed, "patch_size": [1, 2, 2], "keyframe_noise_aug": 0.999}, upstream=UPSTREAM, seed=seed)
    print(name, [tuple(c.shape) for c in conditions], "->", tuple(state.condition_rows.shape))


def main():
    global ARGS, UPSTREAM
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--commit", default="58eb52c0803ea9af3abec60841c2a093bdf1f951")
    ARGS = ap.parse_args()
    UPSTREAM = diffusers_upstream(ARGS.commit) + " MiniMaxH3PrepareConditionLatentsStep"
    case("two_keyframes", 42, [(24, 1, 4, 6), (24, 1, 4, 6)])  # first and last keyframe, one latent frame each
    case("references", 7, [(24, 1, 6, 4), (24, 7, 2, 4), (24, 1, 2, 2)])  # an image, a 22-frame video, an image (sizes differ)


if __name__ == "__main__":
    main()
