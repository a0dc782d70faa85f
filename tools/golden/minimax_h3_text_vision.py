"""Golden vectors for src/models/minimax_h3/text-encoder/vision.ts: MiniMax H3's Qwen3-VL conditioner on a presentation
with pictures (FL2VA keyframes / Ref2VA image references): upstream's get_qwen3vl_prompt_embeds (diffusers
modular_pipelines/minimax_h3/encoders.py at 58eb52c0) with vision inputs, on the tiny Qwen3VLForConditionalGeneration
of minimax_h3_text.py (4 decoder layers, hidden_states[3]; a 1-block tower with deepstack at block 0).

Run in the reference lab:
  bash ../shared/tools/reflab/run.sh -u diffusers=/opt/upstream/diffusers/src -- \
    python3 /project/tools/golden/minimax_h3_text_vision.py --out /project/test/fixtures/golden
Writes minimax_h3/text_encoder_vision/<case>.safetensors: weight.model.language_model.{embed_tokens, layers < the
conditioning layer}.* and weight.model.visual.*,
input.ids (the presentation, each <|image_pad|> run expanded to its picture's merged tokens), input.pixel_values_<i>
(patches x 3 * 2 * 2 * 2, the processor's layout) and input.grid_<i> (t, h, w in patches), output.prompt_embeds; the
processor is the stand-in of minimax_h3_text.py (mm_token_type_ids from the pad ids, as ProcessorMixin does).
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import lowp, pass_dtype, record_f16, seed_everything, transformers_upstream, write_case  # noqa: E402
from qwen3 import randomize  # noqa: E402
from minimax_h3_text import IMAGE_ID, LAYER, TEXT, TEXT_OTHER, VIDEO_ID, VISION, VISION_END, VISION_OTHER, VISION_START, TextOnlyProcessor  # noqa: E402

from diffusers.modular_pipelines.minimax_h3.encoders import get_qwen3vl_prompt_embeds  # noqa: E402
from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration  # noqa: E402


def presentation(parts):
    """parts: ints (text ids) and (t, h, w) grids (a vision block of h w / 4 pads)."""
    ids, grids = [], []
    for p in parts:
        if isinstance(p, tuple):
            ids += [VISION_START] + [IMAGE_ID] * (p[0] * p[1] * p[2] // 4) + [VISION_END]
            grids.append(p)
        else:
            ids.append(p)
    return ids, grids


def case(out_dir, name, seed, parts, text=TEXT, vision=VISION, layer=LAYER):
    gen = seed_everything(seed)
    cfg = Qwen3VLConfig(text_config=text, vision_config=vision, image_token_id=IMAGE_ID, video_token_id=VIDEO_ID,
                        vision_start_token_id=VISION_START, vision_end_token_id=VISION_END)
    cfg._attn_implementation = "eager"
    model = Qwen3VLForConditionalGeneration(cfg).eval()
    model.config._attn_implementation = "eager"
    randomize(model, gen)
    ids, grids = presentation(parts)
    width = vision["in_channels"] * vision["temporal_patch_size"] * vision["patch_size"] ** 2
    pixels = [torch.randn(g[0] * g[1] * g[2], width, generator=gen) for g in grids]
    # the decoder up to the conditioning layer (what the encoder reads) and the tower
    def kept(k):
        if k.startswith("model.visual.") or k.startswith("model.language_model.embed_tokens."):
            return True
        parts = k.split(".")
        return k.startswith("model.language_model.layers.") and int(parts[3]) < layer
    weights = {k: v for k, v in model.state_dict().items() if kept(k)}
    run = lowp(model)
    vision_inputs = {"pixel_values": torch.cat(pixels), "image_grid_thw": torch.tensor(grids)}
    out = get_qwen3vl_prompt_embeds(run, TextOnlyProcessor(), ids, vision_inputs, text_encoder_layer=layer,
                                    device=torch.device("cpu"), dtype=pass_dtype())
    cfg_dict = cfg.to_dict()
    cfg_dict.pop("_name_or_path", None)
    cfg_dict["text_encoder_layer"] = layer
    inputs = {"ids": torch.tensor([ids])}
    for i, (p, g) in enumerate(zip(pixels, grids)):
        inputs[f"pixel_values_{i}"] = p
        inputs[f"grid_{i}"] = torch.tensor(g)
    write_case(out_dir, "minimax_h3", "text_encoder_vision", name, weights=weights, inputs=inputs,
               outputs={"prompt_embeds": out}, config=cfg_dict, seed=seed,
               upstream="diffusers modular_pipelines/minimax_h3 (58eb52c0803e) get_qwen3vl_prompt_embeds; " + transformers_upstream())


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    a = ap.parse_args()

    def cases():
        # FL2VA: "<Picture 1>: " + a block, "<Picture 2>: " + a block, then the prompt (stand-in ids)
        case(a.out, "fl2va_two_keyframes", 41, [5, 17, 42, (1, 4, 6), 5, 18, 42, (1, 4, 4), 60, 23, 1, 84, 30])
        # Ref2VA: an image, a voice label (text only), a portrait image, the prompt
        case(a.out, "ref2va_image_voice_image", 42, [7, 17, (1, 6, 4), 8, 19, 9, 20, (1, 2, 4), 33, 34, 35])
        # another config and seed: 5 layers of 48, head_dim 24, mrope [6, 3, 3], hidden_states[4], one picture
        case(a.out, "other_config_one_picture", 43, [5, 17, 42, (1, 4, 4), 70, 2], TEXT_OTHER, VISION_OTHER, 4)

    record_f16(cases)
