"""Golden vectors for src/models/minimax_h3/conditioning/image-prep.ts and src/models/common/pil-resize.ts: MiniMax H3 putting input
pictures onto its canvas, as diffusers' modular pipeline does it (58eb52c0): MiniMaxH3ResizeStep.__call__ (keyframes:
canvas from the first keyframe's aspect, the first stretched, a last cover-cropped) and MiniMaxH3Ref2VASetupStep.__call__
(image references scaled to a short edge, sides rounded to 32; the 16:9 canvas), with the image processor the steps
create (VaeImageProcessor, LANCZOS through Pillow) and Pillow's own Image.resize(LANCZOS) for the bare resampler cases.
The steps run with their block-state plumbing stubbed; the canvas rule's numbers are configs of theirs
(canvas_short_edge, canvas_max_pixels, reference_image_short_edge), set small here so the fixtures stay small (the
released 768 / 768 x 1344 / 2048 go through the same arithmetic; the unit tests check released canvases).

Run in the reference lab:
  bash ../shared/tools/reflab/run.sh -u diffusers=/opt/upstream/diffusers/src -- \
    python3 /project/tools/golden/minimax_h3_image_prep.py --out /project/test/fixtures/golden
Writes minimax_h3/image_prep/<case>.safetensors: input.image_<i> [h, w, 3] uint8 values (F32); output.image_<i> the
prepared pictures [H, W, 3]; config {kind: keyframes | references | resize, the rule's numbers, output sizes}.
"""
import argparse
import os
import sys
from types import SimpleNamespace

import numpy as np
import torch
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import diffusers_upstream, write_case  # noqa: E402

from diffusers.image_processor import VaeImageProcessor  # noqa: E402
from diffusers.modular_pipelines.minimax_h3.before_encoder import MiniMaxH3Ref2VASetupStep, MiniMaxH3ResizeStep  # noqa: E402
from diffusers.modular_pipelines.minimax_h3.references import MiniMaxH3ImageReference  # noqa: E402

MODEL, COMPONENT = "minimax_h3", "image_prep"


def picture(rng, w, h):
    # smooth gradients plus noise: resampling overshoot and clipping both show
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([x * 255 / max(w - 1, 1), y * 255 / max(h - 1, 1), (x + y) * 127 / max(w + h - 2, 1)], -1)
    img = np.clip(base + rng.normal(0, 40, (h, w, 3)), 0, 255).astype(np.uint8)
    img[h // 3: h // 3 + 2, :, :] = 255  # a hard edge
    return Image.fromarray(img)


def run(step, components, **block):
    state = SimpleNamespace(**block)
    step.get_block_state = lambda _s: state
    step.set_block_state = lambda _s, bs: None
    step.__call__(components, None)
    return state


def components(short_edge, max_pixels, ref_short_edge=2048):
    return SimpleNamespace(image_processor=VaeImageProcessor(vae_scale_factor=16), canvas_multiple=32,
                           config=SimpleNamespace(canvas_short_edge=short_edge, canvas_max_pixels=max_pixels,
                                                  reference_image_short_edge=ref_short_edge),
                           vae_frames_per_chunk=17, vae_latents_per_chunk=5, fps=24, min_duration=5.0, max_duration=15.0,
                           audio_sampling_rate=32000)


def save(name, images, outputs, config):
    write_case(ARGS.out, MODEL, COMPONENT, name, weights={},
               inputs={f"image_{i}": torch.from_numpy(np.asarray(im)).float() for i, im in enumerate(images)},
               outputs={f"image_{i}": torch.from_numpy(np.asarray(im)).float() for i, im in enumerate(outputs)},
               config=config, upstream=UPSTREAM, seed=0)
    print(name, [im.size for im in images], "->", [im.size for im in outputs])


def keyframes(name, seed, sizes, short_edge, max_pixels):
    rng = np.random.RandomState(seed)
    images = [picture(rng, w, h) for w, h in sizes]
    st = run(MiniMaxH3ResizeStep(), components(short_edge, max_pixels), image=images[0],
             last_image=images[1] if len(images) > 1 else None, height=None, width=None)
    save(name, images, st.keyframes, {"kind": "keyframes", "multiple": 32, "short_edge": short_edge,
                                       "max_pixels": max_pixels, "height": st.height, "width": st.width})


def references(name, seed, sizes, ref_short_edge):
    rng = np.random.RandomState(seed)
    images = [picture(rng, w, h) for w, h in sizes]
    st = run(MiniMaxH3Ref2VASetupStep(), components(768, 768 * 1344, ref_short_edge),
             references=[MiniMaxH3ImageReference(image=im) for im in images], num_frames=124, height=None, width=None)
    out = [r.image for r in st.normalized_references]
    save(name, images, out, {"kind": "references", "multiple": 32, "short_edge": ref_short_edge,
                             "canvas_height": st.height, "canvas_width": st.width})


def resize(name, seed, size, to):
    rng = np.random.RandomState(seed)
    im = picture(rng, *size)
    save(name, [im], [im.resize(to, Image.Resampling.LANCZOS)], {"kind": "resize", "width": to[0], "height": to[1]})


def main():
    global ARGS, UPSTREAM
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--commit", default="58eb52c0803ea9af3abec60841c2a093bdf1f951")
    ARGS = ap.parse_args()
    UPSTREAM = diffusers_upstream(ARGS.commit) + f" MiniMaxH3ResizeStep / MiniMaxH3Ref2VASetupStep (Pillow {Image.__version__})"
    # a first keyframe upscaled (75 x 50 onto 96 x 64)
    keyframes("first_upscaled", 1, [(75, 50)], 64, 64 * 112)
    # first (4:3, stretched) and a portrait last (cover-cropped: scaled to 96 x 192, rows 64..128 kept)
    keyframes("first_last", 2, [(120, 90), (50, 100)], 64, 64 * 112)
    # a wide first over the area cap (150 x 80 at short edge 32, area 32 x 56: 64 x 32), downscaled; a squarish last
    # downscaled and cropped
    keyframes("first_last_downscaled", 3, [(150, 80), (100, 90)], 32, 32 * 56)
    # references to a 64 short edge: 72 x 32 (144 / 32 = 4.5 rounds to even: 128 x 64), 33 x 77 (64 x 160), 50 x 50
    references("references", 4, [(72, 32), (33, 77), (50, 50)], 64)
    # the bare resampler: down in one axis and up in the other, and both down by a non-integer factor
    resize("resize_mixed", 5, (61, 23), (40, 50))
    resize("resize_down", 6, (97, 83), (31, 29))


if __name__ == "__main__":
    main()
