"""Golden vectors for the style-reference path of src/models/krea2/conditioner.ts (encodeWithImages): Kiln's own
template (docs/models/krea-2.md "Style references") run through transformers' Qwen3VLForConditionalGeneration with
images, as Qwen3-VL reads an image prompt: the processor's patches, the vision tower, its merged tokens over the
<|image_pad|> rows, deepstack features after the first layers, get_rope_index's 3-D positions; then Krea 2's taps
(hidden_states at select_layers, stacked per token, encoder.py) of the rows from the prompt on. The design is ours;
what is checked against upstream is every computation it uses.

Upstream (read, never copied): huggingface/transformers models/qwen3_vl (the lab's 5.12.1), krea-ai/krea-2 encoder.py
@ db3984fbc6e13b34c0064990fc2d95ac64d00058 (the taps).
Run from the checkout, as root, one lab run at a time:

  cd /work/main && flock /tmp/kiln-reflab.lock bash /work/shared/tools/reflab/run.sh -- \
      python3 /project/tools/golden/krea2_style.py --out /project/test/fixtures/golden

Token ids are stand-ins at a tiny vocabulary (as tools/golden/qwen_image21_text.py): 34 prefix ids, then per reference
"Style reference i: " (4 ids), <|vision_start|>, the image's <|image_pad|> run, <|vision_end|>, "\\n"; the prompt ids;
the 5 suffix ids. The tokenizer side of the template is tested on its own (test/models/krea2_pipeline.test.ts).
Writes krea2/style_conditioner/<case>.safetensors:
  weight.model.language_model.*, weight.model.visual.*   the checkpoint's keys
  input.ids (1, L) the expanded ids; input.keep_from (1) the first kept row (the prompt's); input.select_layers
  input.image_<i> (H, W, 3) 8-bit RGB at the processed size; input.min_pixels / max_pixels; input.grid_thw (N, 3)
  output.position_ids (3, L)   get_rope_index
  output.taps (1, L - keep_from, n, hidden)
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import lowp, record_f16, transformers_upstream, write_case  # noqa: E402
from qwen3_vl_vision import MAX_PIXELS, MIN_PIXELS, build_model, process, random_rgb, randomize_visual  # noqa: E402

UPSTREAM = "krea-ai/krea-2@db3984fbc6e13b34c0064990fc2d95ac64d00058 encoder.py taps; "
IMAGE, VSTART, VEND, NL = 92, 94, 95, 7
PREFIX = [90, 11, NL] + list(range(40, 69)) + [91, NL]  # 34 stand-ins: system turn, <|im_start|>user\n
SUFFIX = [91, NL, 90, 13, NL]


def label(i):
    return [20, 21, 22, 30 + i]  # "Style" " reference" " i" ":" stand-ins


TEXT = dict(vocab_size=97, hidden_size=32, intermediate_size=48, num_hidden_layers=5, num_attention_heads=4,
            num_key_value_heads=2, head_dim=8, rms_norm_eps=1e-6, max_position_embeddings=1024,
            rope_parameters={"rope_type": "default", "rope_theta": 5000000.0, "mrope_section": [2, 1, 1],
                             "mrope_interleaved": True})
VISION = dict(depth=3, hidden_size=16, intermediate_size=24, num_heads=2, out_hidden_size=32, patch_size=8,
              spatial_merge_size=2, temporal_patch_size=2, num_position_embeddings=16,
              deepstack_visual_indexes=[0, 2], hidden_act="gelu_pytorch_tanh")


def randomize_text(lm, gen):
    with torch.no_grad():
        for name, p in lm.named_parameters():
            if name.endswith("norm.weight"):
                hi = 2.5 if ("q_norm" in name or "k_norm" in name) else 1.5
                p.copy_(0.5 + (hi - 0.5) * torch.rand(p.shape, generator=gen))
            elif "embed_tokens" in name:
                p.copy_(torch.randn(p.shape, generator=gen))
            elif p.dim() == 2:
                p.copy_(torch.randn(p.shape, generator=gen) / p.shape[1] ** 0.5)


def case(out, name, seed, sizes, prompt, select_layers=(1, 2, 4), text=TEXT, vision=VISION):
    cfg, model, gen = build_model(seed, vision, text)
    randomize_text(model.model.language_model, gen)
    randomize_visual(model.model.visual, gen)
    images = [random_rgb(gen, h, w) for h, w in sizes]
    pixel_values, grid = process(vision, images)
    merge = vision["spatial_merge_size"]
    seq = list(PREFIX)
    for i, g in enumerate(grid.tolist()):
        seq += label(i + 1) + [VSTART] + [IMAGE] * (g[0] * g[1] * g[2] // merge ** 2) + [VEND, NL]
    keep_from = len(seq)
    seq += prompt + SUFFIX
    ids = torch.tensor([seq])
    mm = (ids == IMAGE).int()
    run = lowp(model)
    with torch.no_grad():
        out_ = run(input_ids=ids, attention_mask=torch.ones_like(ids), pixel_values=lowp(pixel_values),
                   image_grid_thw=grid, mm_token_type_ids=mm, output_hidden_states=True)
        position_ids, _ = model.model.get_rope_index(ids, mm_token_type_ids=mm, image_grid_thw=grid,
                                                     attention_mask=torch.ones_like(ids))
    taps = torch.stack([out_.hidden_states[i] for i in select_layers], dim=2)[:, keep_from:]
    config = cfg.to_dict()
    config.pop("_name_or_path", None)
    weights = {"model.language_model." + k: v for k, v in model.model.language_model.state_dict().items()}
    weights.update({"model.visual." + k: v for k, v in model.model.visual.state_dict().items()})
    inputs = {"ids": ids, "keep_from": torch.tensor([keep_from]), "select_layers": torch.tensor(list(select_layers)),
              "grid_thw": grid, "min_pixels": torch.tensor([MIN_PIXELS]), "max_pixels": torch.tensor([float(MAX_PIXELS)])}
    inputs.update({f"image_{i}": im for i, im in enumerate(images)})
    write_case(out, "krea2", "style_conditioner", name, weights=weights, inputs=inputs,
               outputs={"taps": taps, "position_ids": position_ids[:, 0]}, config=config,
               upstream=UPSTREAM + transformers_upstream(), seed=seed)


def main(out):
    case(out, "one_reference", 1, [(32, 48)], [50, 51, 52, 53, 54])
    case(out, "three_references", 2, [(32, 32), (48, 32), (32, 64)], [60, 61, 62])
    case(out, "two_references_other_taps", 3, [(64, 32), (32, 32)], [55, 56, 57, 58, 59, 60, 61], select_layers=(0, 3, 4))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True, help="fixture root (test/fixtures/golden)")
    a = ap.parse_args()
    record_f16(lambda: main(a.out))
