"""Golden vectors for src/models/minimax_h3/sequence/keyframes.ts: the packed layout, RoPE positions and per-row timesteps of
keyframes pinned at any frame (ComfyUI's MiniMaxH3AddGuide path, the only upstream that anchors more than a first and
a last frame), and for 1 and 2 keyframes also the official FL2VA layout (diffusers' build_packed_sequence).

Upstream: ComfyUI's PackedLayout (comfy/ldm/minimax/model.py at 01a56b76) and the timestep classes of its _forward
(seg_t: text and target video at t_v, target audio at t_a, keyframe rows at max(t_v, VISUAL_COND_TIMESTEP), keyframe
audio rows at max(t_a, AUDIO_COND_TIMESTEP); tags text 1 (a vision token 0), video 0, audio 2). The layout code is read
from an excerpt of that file kept outside the repository (the constants, position helpers and PackedLayout, verbatim:
no snapshot of that commit can be fetched, the file was read with the search tool's read_file):
  bash ../shared/tools/reflab/run.sh -u diffusers=/opt/upstream/diffusers/src -u comfyui=/opt/upstream/comfyui-h3 -- \
    python3 /project/tools/golden/minimax_h3_keyframes.py --out /project/test/fixtures/golden
Writes minimax_h3/keyframes/<case>.safetensors (no weights):
  input.num_frames, input.height, input.width   the request (frames snapped up to 17k + 5 as both upstreams do)
  input.text_token_tags                           per text row: 1 text, 0 a keyframe's vision token
  input.guide_frames                              per keyframe: the resolved pixel frame index it is pinned at
  input.guide_video, input.guide_audio_latents    per keyframe: 1 if it has an image (one latent frame), and the audio
                                                  latent frames of an audio guide (0: none)
  input.timesteps                                 [t_video, t_audio] of one forward
  output.position_bits                            ComfyUI's float64 positions as 4 little-endian 16-bit words each
  output.token_tags, video_indices, audio_indices, num_condition_video_rows, num_condition_audio_rows
  output.row_timestep                             every row's timestep in that forward (float32, as the time embedder gets it)
  output.diffusers_position_bits                  (image keyframes at 'first' / 'last' only) build_packed_sequence's
                                                  positions for the same request: the official FL2VA layout
"""
import argparse
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import write_case  # noqa: E402

from comfy_h3_layout import AUDIO_COND_TIMESTEP, PackedLayout, VISUAL_COND_TIMESTEP  # noqa: E402
from diffusers.modular_pipelines.minimax_h3.before_denoise import MiniMaxH3PrepareLayoutStep  # noqa: E402
from diffusers.modular_pipelines.minimax_h3.modular_pipeline import (  # noqa: E402
    align_num_frames,
    audio_latent_num_frames,
    video_latent_num_frames,
)

MODEL, COMPONENT = "minimax_h3", "keyframes"
UPSTREAM = ("Comfy-Org/ComfyUI 01a56b76bba3f32021fa846104baf2e500adc0da comfy/ldm/minimax/model.py PackedLayout; "
            "huggingface/diffusers 58eb52c0803ea9af3abec60841c2a093bdf1f951 build_packed_sequence (torch {})").format(torch.__version__)
VIDEO_TAG, TEXT_TAG, AUDIO_TAG = 0, 1, 2


def position_bits(p):
    words = np.ascontiguousarray(p.numpy().astype("<f8")).view("<u2").reshape(*p.shape, 4)
    return torch.from_numpy(words.astype(np.float32))


def case(name, frames, height, width, text_tags, guides, t_video, t_audio):
    """guides: (frame_index, has_image, audio_latent_frames) per keyframe, in packed order."""
    num_frames = align_num_frames(frames, 17, 5)
    latent_t = video_latent_num_frames(num_frames, 17, 5)
    lat_h, lat_w = height // 16, width // 16
    audio_t = audio_latent_num_frames(num_frames)
    text_len = len(text_tags)
    keyframes = []
    for idx, image, rt in guides:
        kf = {"resolved_frame_index": idx}
        if image:
            kf["latent"] = torch.zeros(1, 24, 1, lat_h, lat_w)  # only its shape is read
        if rt:
            kf["audio_latent"] = torch.zeros(1, 32, 2, rt)
        keyframes.append(kf)
    layout = PackedLayout(text_len, latent_t, lat_h, lat_w, audio_t, keyframes=keyframes)

    # ComfyUI _forward's timestep classes and modality tags per segment
    seg_t = {"text": t_video, "video": t_video, "audio": t_audio, "cond": max(t_video, VISUAL_COND_TIMESTEP),
             "cond_audio": max(t_audio, AUDIO_COND_TIMESTEP)}
    seg_tag = {"video": VIDEO_TAG, "audio": AUDIO_TAG, "cond": VIDEO_TAG, "cond_audio": AUDIO_TAG}
    row_t = torch.empty(layout.seq_len, dtype=torch.float64)
    tags = torch.empty(layout.seq_len, dtype=torch.long)
    for a, b, kind in layout.segments:
        row_t[a:b] = seg_t[kind]
        tags[a:b] = torch.tensor(text_tags) if kind == "text" else seg_tag[kind]
    img_pos, audio_pos = layout.img_pos, layout.audio_pos
    outputs = {
        "position_bits": position_bits(layout.position_ids),
        "token_tags": tags,
        "video_indices": img_pos,
        "audio_indices": audio_pos,
        "num_condition_video_rows": torch.tensor([int((~layout.img_update).sum())]),
        "num_condition_audio_rows": torch.tensor([int((~layout.audio_update).sum())]),
        "row_timestep": row_t.to(torch.float32),
    }
    last = sum([1, 4, 4, 4, 4][k % 5] for k in range(latent_t)) - 1
    if all(image and not rt and idx in (0, last) for idx, image, rt in guides) and len(guides) <= 2:
        anchors = tuple("first" if idx == 0 else "last" for idx, _, _ in guides)
        pos, *_ = MiniMaxH3PrepareLayoutStep.build_packed_sequence(
            torch.tensor(text_tags, dtype=torch.long), latent_t, lat_h, lat_w, audio_t, (1, 2, 2), 2, AUDIO_TAG,
            VIDEO_TAG, anchors)
        outputs["diffusers_position_bits"] = position_bits(pos)
        differ = int((pos != layout.position_ids).sum())
        print(f"{name}: diffusers and ComfyUI positions differ in {differ} of {pos.numel()} values")
    inputs = {
        "num_frames": torch.tensor([frames]), "height": torch.tensor([height]), "width": torch.tensor([width]),
        "text_token_tags": torch.tensor(text_tags),
        "guide_frames": torch.tensor([g[0] for g in guides]), "guide_video": torch.tensor([int(g[1]) for g in guides]),
        "guide_audio_latents": torch.tensor([g[2] for g in guides]),
        "timesteps": torch.tensor([t_video, t_audio], dtype=torch.float64),
    }
    config = {"num_frames": num_frames, "latent_frames": latent_t, "latent_height": lat_h, "latent_width": lat_w,
              "audio_latents": audio_t, "patch_size": [1, 2, 2], "visual_cond_timestep": VISUAL_COND_TIMESTEP,
              "audio_cond_timestep": AUDIO_COND_TIMESTEP}
    write_case(ARGS.out, MODEL, COMPONENT, name, weights={}, inputs=inputs, outputs=outputs, config=config,
               upstream=UPSTREAM, seed=0)


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ARGS = ap.parse_args()
    vision = [TEXT_TAG] * 3 + [VIDEO_TAG] * 4 + [TEXT_TAG] * 2 + [VIDEO_TAG] * 4 + [TEXT_TAG] * 5
    # 1 keyframe: the first frame (39 frames, 12 latent frames, 64 x 96)
    case("one_keyframe", 39, 64, 96, [TEXT_TAG] * 3 + [VIDEO_TAG] * 4 + [TEXT_TAG] * 5, [(0, True, 0)], 0.25, 0.5)
    # 2 keyframes: first and last at 5 s (124 frames, 37 latent frames: past 16, where diffusers' pairwise sum and
    # ComfyUI's 5/3 (N - 1) may part in the last bit), 128 x 224
    case("two_keyframes_5s", 124, 128, 224, vision, [(0, True, 0), (123, True, 0)], 0.6, 0.3)
    # a lone last keyframe (22 frames)
    case("last_keyframe", 22, 64, 64, [TEXT_TAG] * 2 + [VIDEO_TAG] * 4 + [TEXT_TAG] * 3, [(21, True, 0)], 0.999, 0.2)
    # 4 keyframes: first, last and two evenly between (frames 0, 13, 25, 38 of 39), 64 x 96
    case("four_keyframes", 39, 64, 96, vision, [(0, True, 0), (13, True, 0), (25, True, 0), (38, True, 0)], 0.4, 0.7)
    # 6 keyframes on a portrait canvas at 73 frames (0, 14, 29, 43, 58, 72), t_video past the keyframe level
    case("six_keyframes_portrait", 73, 96, 32, vision,
         [(0, True, 0), (14, True, 0), (29, True, 0), (43, True, 0), (58, True, 0), (72, True, 0)], 0.9995, 0.9)
    # an audio guide at frame 0 (a soundtrack on the target timeline, 10 latent frames) with a first keyframe, and a
    # last keyframe: ComfyUI's AddGuide with audio
    case("keyframes_with_audio_guide", 39, 64, 64, vision, [(0, True, 10), (38, True, 0)], 0.5, 0.5)
    # a soundtrack alone pinned at frame 0 over the whole target (65 audio latent frames of 39 frames): the guide form
    # of issue 15's track mode (AddGuide with audio and no image)
    case("track_audio_guide", 39, 64, 96, [TEXT_TAG] * 6, [(0, False, 65)], 0.35, 0.45)


if __name__ == "__main__":
    main()
