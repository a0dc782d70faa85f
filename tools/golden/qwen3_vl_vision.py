"""Golden vectors for src/models/qwen3_vl_vision: the Qwen3-VL vision tower (Qwen3VLVisionModel) and the image
processor's patching (Qwen2VLImageProcessor, which Qwen3-VL's processor uses), from the lab's transformers.

Run in the reference lab from the checkout (one lab run at a time):
  flock /tmp/kiln-reflab.lock bash /work/shared/tools/reflab/run.sh -- \
    python3 /project/tools/golden/qwen3_vl_vision.py --out /project/test/fixtures/golden
Writes qwen3_vl_vision/tower/<case>.safetensors with
  weight.model.visual.*           the tower under Qwen3VLForConditionalGeneration's own key prefix
  input.image_<i> (H, W, 3)       8-bit RGB pixels (stored as F32), as the pipeline hands them to the processor
  input.grid_thw (N, 3)           the processor's image_grid_thw
  input.min_pixels, input.max_pixels   the processor's size bounds used (small, so that no resize happens)
  output.pixel_values (P, C*T*p*p) the processor's patches (merge-block order, the frame repeated T times)
  output.embeds (P / 4, out)      the merged tokens (pooler_output), images in order
  output.deepstack_<k> (P / 4, out)  deepstack_merger_list[k] of the states after block deepstack_visual_indexes[k]
  output.last_hidden_state (P, hidden)  the states after the last block (before the merger)
Config: the real structure (patch 16, temporal 2, merge 2, gelu_pytorch_tanh, learned 2D position table
interpolated, deepstack) at tiny widths; depth 3 with deepstack at blocks [0, 2] so that the index mapping matters.
Cases: one 64x96 image; two images 64x32 and 32x64 in one call (attention stays inside each image); and, at another
config and seed (depth 2, deepstack at [1], 3 heads of 8, a 64-entry position table), one 64x64 image.
"""
import argparse
import os
import sys

import numpy as np
import torch
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import lowp, record_f16, seed_everything, transformers_upstream, write_case  # noqa: E402

from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration  # noqa: E402
from transformers.models.qwen2_vl.image_processing_qwen2_vl import Qwen2VLImageProcessor  # noqa: E402

VISION_TINY = dict(depth=3, hidden_size=16, intermediate_size=24, num_heads=2, out_hidden_size=32, patch_size=16,
                   spatial_merge_size=2, temporal_patch_size=2, num_position_embeddings=36,
                   deepstack_visual_indexes=[0, 2], hidden_act="gelu_pytorch_tanh")
TEXT_TINY = dict(vocab_size=97, hidden_size=32, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                 num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-6, max_position_embeddings=256,
                 rope_parameters={"rope_type": "default", "rope_theta": 5000000.0, "mrope_section": [4, 2, 2],
                                  "mrope_interleaved": True})
MIN_PIXELS, MAX_PIXELS = 32 * 32, 4096 * 4096


def randomize_visual(visual, gen):
    """LayerNorm weights U(0.5, 1.5), biases N(0, 0.2^2), matrices and the conv N(0, 1/fan_in), positions N(0, 0.5^2)."""
    with torch.no_grad():
        for name, p in visual.named_parameters():
            if name == "pos_embed.weight":
                p.copy_(0.5 * torch.randn(p.shape, generator=gen))
            elif name.endswith("bias"):
                p.copy_(0.2 * torch.randn(p.shape, generator=gen))
            elif p.dim() == 1:
                p.copy_(0.5 + torch.rand(p.shape, generator=gen))
            else:
                p.copy_(torch.randn(p.shape, generator=gen) / (p.numel() // p.shape[0]) ** 0.5)


def build_model(seed, vision, text=TEXT_TINY):
    gen = seed_everything(seed)
    cfg = Qwen3VLConfig(text_config=text, vision_config=vision, image_token_id=92, video_token_id=93,
                        vision_start_token_id=94, vision_end_token_id=95, tie_word_embeddings=False)
    cfg._attn_implementation = "eager"
    model = Qwen3VLForConditionalGeneration(cfg).eval()
    return cfg, model, gen


def processor(vision, min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS):
    """Qwen3-VL's image processor settings (preprocessor_config.json: mean/std 0.5, patch/merge/temporal from the tower)."""
    return Qwen2VLImageProcessor(patch_size=vision["patch_size"], temporal_patch_size=vision["temporal_patch_size"],
                                 merge_size=vision["spatial_merge_size"], image_mean=[0.5, 0.5, 0.5],
                                 image_std=[0.5, 0.5, 0.5], size={"shortest_edge": min_pixels, "longest_edge": max_pixels})


def random_rgb(gen, h, w):
    return torch.randint(0, 256, (h, w, 3), generator=gen, dtype=torch.uint8)


def process(vision, images):
    """The processor on PIL RGB images; checks it did not resize (patches == (x / 255 - 0.5) / 0.5 rearranged)."""
    out = processor(vision)(images=[Image.fromarray(im.numpy(), "RGB") for im in images], return_tensors="pt")
    p, m, t = vision["patch_size"], vision["spatial_merge_size"], vision["temporal_patch_size"]
    mine = []
    for im in images:
        h, w, _ = im.shape
        x = (im.permute(2, 0, 1).double() / 255 - 0.5) / 0.5  # (3, H, W)
        x = x.reshape(3, h // p // m, m, p, w // p // m, m, p).permute(1, 4, 2, 5, 0, 3, 6)  # (gh/m, gw/m, m, m, C, p, p)
        x = x.unsqueeze(5).expand(-1, -1, -1, -1, -1, t, -1, -1).reshape(-1, 3 * t * p * p)
        mine.append(x)
    diff = (out["pixel_values"].double() - torch.cat(mine)).abs().max().item()
    print(f"processor patches vs (x/255 - 0.5)/0.5 in merge-block order: max diff {diff:.3g}")
    assert diff < 1e-6, "the processor resized or reordered differently than documented"
    return out["pixel_values"], out["image_grid_thw"]


# Another config: a different depth, deepstack index, head count and width, and a larger position table.
VISION_OTHER = dict(depth=2, hidden_size=24, intermediate_size=40, num_heads=3, out_hidden_size=40, patch_size=16,
                    spatial_merge_size=2, temporal_patch_size=2, num_position_embeddings=64,
                    deepstack_visual_indexes=[1], hidden_act="gelu_pytorch_tanh")


def tower_case(out_dir, name, seed, sizes, vision=VISION_TINY):
    cfg, model, gen = build_model(seed, vision)
    visual = model.model.visual
    randomize_visual(visual, gen)
    images = [random_rgb(gen, h, w) for h, w in sizes]
    pixel_values, grid = process(vision, images)
    with torch.no_grad():
        out = lowp(visual)(lowp(pixel_values), grid_thw=grid, return_dict=True)
    outputs = {"pixel_values": pixel_values, "embeds": out.pooler_output, "last_hidden_state": out.last_hidden_state}
    for k, d in enumerate(out.deepstack_features):
        outputs[f"deepstack_{k}"] = d
    inputs = {f"image_{i}": im for i, im in enumerate(images)}
    inputs.update(grid_thw=grid, min_pixels=torch.tensor([MIN_PIXELS]), max_pixels=torch.tensor([float(MAX_PIXELS)]))
    config = cfg.to_dict()
    config.pop("_name_or_path", None)
    write_case(out_dir, "qwen3_vl_vision", "tower", name,
               weights={"model.visual." + k: v for k, v in visual.state_dict().items()},
               inputs=inputs, outputs=outputs, config=config,
               upstream=f"{transformers_upstream()} Qwen3VLVisionModel + Qwen2VLImageProcessor", seed=seed)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True, help="fixture root (test/fixtures/golden)")
    a = ap.parse_args()

    def cases():
        tower_case(a.out, "one_64x96", 31, [(64, 96)])
        tower_case(a.out, "two_64x32_32x64", 32, [(64, 32), (32, 64)])
        tower_case(a.out, "other_config_64x64", 33, [(64, 64)], VISION_OTHER)

    record_f16(cases)
