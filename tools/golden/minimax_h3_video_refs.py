"""Golden vectors for src/models/minimax_h3/conditioning/video-refs.ts: a video reference before encoding, as diffusers prepares it
(58eb52c0): MiniMaxH3Ref2VASetupStep._normalize_video_condition (24 fps by holding / dropping frames, truncation, LANCZOS
onto its own canvas; the canvas rule's numbers small here so fixtures stay small) and
MiniMaxH3Ref2VATextEncoderStep._sample_video_condition_frames (2 fps sampling, pairs, block timestamps).

Run in the reference lab:
  bash ../shared/tools/reflab/run.sh -u diffusers=/opt/upstream/diffusers/src -- \
    python3 /project/tools/golden/minimax_h3_video_refs.py --out /project/test/fixtures/golden
Writes minimax_h3/video_refs/<case>.safetensors: normalize cases: input.frames [n, h, w, 3] (uint8 values),
output.frames; sample cases: output.indices, output.block_timestamps (float64 values as float32: they are k / 4); config
{kind, fps, num_frames, short_edge, max_pixels | count, sample_fps, temporal_patch}.
"""
import argparse
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import diffusers_upstream, write_case  # noqa: E402

from diffusers.modular_pipelines.minimax_h3.before_encoder import MiniMaxH3Ref2VASetupStep  # noqa: E402
from diffusers.modular_pipelines.minimax_h3.encoders import MiniMaxH3Ref2VATextEncoderStep  # noqa: E402

MODEL, COMPONENT = "minimax_h3", "video_refs"


def normalize(name, seed, n, h, w, fps, num_frames, short_edge, max_pixels):
    rng = np.random.RandomState(seed)
    y, x = np.mgrid[0:h, 0:w]
    frames = np.stack([np.clip(np.stack([x * 255 / (w - 1), y * 255 / (h - 1), np.full((h, w), 20 * t)], -1)
                               + rng.normal(0, 30, (h, w, 3)), 0, 255).astype(np.uint8) for t in range(n)])
    out = MiniMaxH3Ref2VASetupStep._normalize_video_condition(frames, float(fps), num_frames, 32, short_edge, max_pixels, 24.0)
    write_case(ARGS.out, MODEL, COMPONENT, name, weights={}, inputs={"frames": torch.from_numpy(frames.copy()).float()},
               outputs={"frames": torch.from_numpy(np.ascontiguousarray(out)).float()},
               config={"kind": "normalize", "fps": fps, "num_frames": num_frames, "short_edge": short_edge,
                       "max_pixels": max_pixels}, upstream=UPSTREAM, seed=seed)
    print(name, frames.shape, "->", out.shape)


def sample(name, count, fps, sample_fps, temporal_patch=2):
    frames = np.zeros((count, 1, 1, 3), dtype=np.uint8)
    picked, stamps = MiniMaxH3Ref2VATextEncoderStep._sample_video_condition_frames(frames, fps, sample_fps, temporal_patch)
    # which frames: recover the indices by marking each frame with its number
    marked = np.arange(count, dtype=np.int64).reshape(count, 1, 1, 1).repeat(3, axis=3)
    picked_idx, _ = MiniMaxH3Ref2VATextEncoderStep._sample_video_condition_frames(marked, fps, sample_fps, temporal_patch)
    indices = [int(f[0, 0, 0]) for f in picked_idx]
    assert len(indices) == len(picked)
    write_case(ARGS.out, MODEL, COMPONENT, name, weights={}, inputs={},
               outputs={"indices": torch.tensor(indices, dtype=torch.float32), "block_timestamps": torch.tensor(stamps, dtype=torch.float64)},
               config={"kind": "sample", "count": count, "fps": fps, "sample_fps": sample_fps, "temporal_patch": temporal_patch},
               upstream=UPSTREAM, seed=0)
    print(name, count, "->", indices, stamps)


def main():
    global ARGS, UPSTREAM
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--commit", default="58eb52c0803ea9af3abec60841c2a093bdf1f951")
    ARGS = ap.parse_args()
    UPSTREAM = diffusers_upstream(ARGS.commit) + " _normalize_video_condition / _sample_video_condition_frames"
    # 30 fps down to 24 (frames dropped), 16 x 28 onto a 32 x 64 canvas (short edge 32, area 32 x 56)
    normalize("from_30fps", 1, 12, 16, 28, 30, 22, 32, 32 * 56)
    # 15 fps up to 24 (frames held), portrait 20 x 12 onto 64 x 32, truncated to 8 frames
    normalize("from_15fps_truncated", 2, 6, 20, 12, 15, 8, 32, 32 * 56)
    # already 24 fps and on its canvas: passed through
    normalize("at_24fps_on_canvas", 3, 5, 32, 64, 24, 22, 32, 32 * 56)
    # 2 fps sampling of 24 fps references: 22 frames (2 s), 39, 124 (5 s), 30 (an odd pair count: last frame repeated)
    for n in (22, 39, 124, 30):
        sample(f"sample_{n}_frames", n, 24.0, 2.0)
    # another rate: 25 fps read at 2 fps (stride 12.5: Python rounds 12.5 to 12, 37.5 to 38)
    sample("sample_25fps", 60, 25.0, 2.0)


if __name__ == "__main__":
    main()
