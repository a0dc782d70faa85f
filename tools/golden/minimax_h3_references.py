"""Golden vectors for src/models/minimax_h3/sequence/references.ts: the Ref2VA packed layout (diffusers'
MiniMaxH3Ref2VAPrepareLayoutStep.build_ref2va_packed_sequence) and the per-row timesteps of one forward
(MiniMaxH3SetTimestepsStep.build_row_timesteps, conditioning at max(t_v, 0.999) and 1.0).

Run in the reference lab from the checkout, with diffusers' src/ outside the repository:
  bash ../shared/tools/reflab/run.sh -u diffusers=/opt/upstream/diffusers/src -- \
    python3 /project/tools/golden/minimax_h3_references.py --out /project/test/fixtures/golden
Writes minimax_h3/references/<case>.safetensors (no weights):
  input.num_frames, input.height, input.width, input.text_token_tags   the request (frames of the form 17k + 5)
  input.references      [R, 5] per reference in request order: kind (0 image, 1 audio, 2 video), latent frames,
                        latent height, latent width, audio latent frames (a video's soundtrack; 0 none)
  input.timesteps       [t_video, t_audio]
  output.position_bits  the float64 positions as 4 little-endian 16-bit words each
  output.token_tags, video_indices, audio_indices, text_indices, num_condition_video_rows, num_condition_audio_rows
  output.row_timestep   every row's timestep (build_row_timesteps' distinct values indexed by its inverse)
The layout reads only the references' kinds and the shapes of their encoded latents, so zero tensors of those shapes
stand in for the encoders' outputs.
"""
import argparse
import os
import sys
from types import SimpleNamespace

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import diffusers_upstream, write_case  # noqa: E402

from diffusers.modular_pipelines.minimax_h3.before_denoise import (  # noqa: E402
    MiniMaxH3Ref2VAPrepareLayoutStep,
    MiniMaxH3SetTimestepsStep,
)
from diffusers.modular_pipelines.minimax_h3.modular_pipeline import audio_latent_num_frames, video_latent_num_frames  # noqa: E402

MODEL, COMPONENT = "minimax_h3", "references"
VIDEO_TAG, TEXT_TAG, AUDIO_TAG = 0, 1, 2
KIND = {"image": 0, "audio": 1, "video": 2}


def position_bits(p):
    words = np.ascontiguousarray(p.numpy().astype("<f8")).view("<u2").reshape(*p.shape, 4)
    return torch.from_numpy(words.astype(np.float32))


def case(name, frames, height, width, text_tags, refs, t_video, t_audio):
    """refs: ("image", h, w) | ("audio", T) | ("video", frames, h, w, T) in latent units, request order."""
    latent_t = video_latent_num_frames(frames, 17, 5)
    lat_h, lat_w = height // 16, width // 16
    audio_t = audio_latent_num_frames(frames)
    references, cond, audio_rows, table = [], [], [], []
    for ref in refs:
        kind = ref[0]
        if kind == "image":
            references.append(SimpleNamespace(kind="image", has_audio=False))
            cond.append(torch.zeros(1, 24, 1, ref[1], ref[2]))
            table.append([0, 1, ref[1], ref[2], 0])
        elif kind == "audio":
            references.append(SimpleNamespace(kind="audio", has_audio=True))
            audio_rows.append(torch.zeros(2 * ref[1], 32))
            table.append([1, 0, 0, 0, ref[1]])
        else:
            references.append(SimpleNamespace(kind="video", has_audio=ref[4] > 0))
            cond.append(torch.zeros(1, 24, ref[1], ref[2], ref[3]))
            if ref[4]:
                audio_rows.append(torch.zeros(2 * ref[4], 32))
            table.append([2, ref[1], ref[2], ref[3], ref[4]])
    tags = torch.tensor(text_tags, dtype=torch.long)
    pos, token_tags, vid, aud, txt, ncv, nca = MiniMaxH3Ref2VAPrepareLayoutStep.build_ref2va_packed_sequence(
        tags, references, cond, audio_rows, latent_t, lat_h, lat_w, audio_t, (1, 2, 2), 2, AUDIO_TAG, VIDEO_TAG)
    distinct, inverse = MiniMaxH3SetTimestepsStep.build_row_timesteps(
        vid, aud, ncv, nca, txt.numel(), float(t_video), float(t_audio), max(float(t_video), 0.999), 1.0)
    outputs = {
        "position_bits": position_bits(pos), "token_tags": token_tags, "video_indices": vid, "audio_indices": aud,
        "text_indices": txt, "num_condition_video_rows": torch.tensor([ncv]), "num_condition_audio_rows": torch.tensor([nca]),
        "row_timestep": distinct[inverse],
    }
    inputs = {
        "num_frames": torch.tensor([frames]), "height": torch.tensor([height]), "width": torch.tensor([width]),
        "text_token_tags": tags, "references": torch.tensor(table), "timesteps": torch.tensor([t_video, t_audio]),
    }
    config = {"num_frames": frames, "latent_frames": latent_t, "latent_height": lat_h, "latent_width": lat_w,
              "audio_latents": audio_t, "patch_size": [1, 2, 2]}
    write_case(ARGS.out, MODEL, COMPONENT, name, weights={}, inputs=inputs, outputs=outputs, config=config,
               upstream=UPSTREAM, seed=0)


def main():
    global ARGS, UPSTREAM
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--commit", default="58eb52c0803ea9af3abec60841c2a093bdf1f951")
    ARGS = ap.parse_args()
    UPSTREAM = diffusers_upstream(ARGS.commit) + " build_ref2va_packed_sequence"
    vision = [TEXT_TAG] * 2 + [VIDEO_TAG] * 6 + [TEXT_TAG] * 3 + [VIDEO_TAG] * 4 + [TEXT_TAG] * 3 + [TEXT_TAG] * 5
    # two images of their own sizes (a square and a portrait one) before a 39-frame 64 x 96 target
    case("two_images", 39, 64, 96, vision, [("image", 8, 8), ("image", 12, 4)], 0.3, 0.6)
    # an image and a voice (an audio reference of 80 latent frames = 2 s; w pinned to the target grid)
    case("image_and_voice", 39, 64, 64, vision, [("image", 6, 10), ("audio", 80)], 0.5, 0.2)
    # three images and a voice, as issue 15's bench case (3 references + 1 voice), 5 s target
    case("three_images_one_voice", 124, 64, 96, vision,
         [("image", 4, 4), ("image", 4, 6), ("image", 6, 4), ("audio", 120)], 0.9995, 0.7)
    # a voice first, then an image: request order moves the clock
    case("voice_then_image", 22, 32, 64, vision[:10], [("audio", 60), ("image", 4, 4)], 0.1, 0.1)
    # a video reference with its soundtrack (22 frames = 7 latent frames on its own 4 x 6 grid, 37 audio latents:
    # the clock advances by max(37, 5/3 x 22)) and a video without one, then an image
    case("videos_and_image", 39, 64, 64, vision,
         [("video", 7, 4, 6, 37), ("video", 2, 4, 4, 0), ("image", 4, 4)], 0.7, 0.4)
    # a video reference of 17 latent frames and two voices: upstream advances the clock by Python's sum() of the spans,
    # which is compensated from CPython 3.12 on (the lab runs 3.14) and here parts from a running sum in the last bit
    case("long_video_two_voices", 22, 32, 32, vision[:6], [("video", 17, 2, 2, 0), ("audio", 30), ("audio", 45)], 0.2, 0.8)


if __name__ == "__main__":
    main()
