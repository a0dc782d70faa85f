"""Golden vectors for src/models/minimax_h3/text-encoder/encoder.ts (MiniMax H3's Qwen3-VL conditioner, text-only T2VA).

Run in the reference lab with diffusers' MiniMax H3 sources on the path:
  bash ../shared/tools/reflab/run.sh -u diffusers=/opt/upstream/diffusers/src -- \
    python3 /project/tools/golden/minimax_h3_text.py --out /project/test/fixtures/golden
Writes minimax_h3/text_encoder/<case>.safetensors by calling upstream's own
`modular_pipelines.minimax_h3.encoders.get_qwen3vl_prompt_embeds` on a tiny Qwen3VLForConditionalGeneration
(4 decoder layers, the conditioning layer scaled from 50 of 64 to 3 of 4). The T2VA step tokenizes the prompt
verbatim (no chat template, no special tokens), so the fixture takes a fixed id list (no BPE needed) and the
processor is a stand-in that derives the mm_token_type_ids from the config's vision token ids, as
ProcessorMixin.create_mm_token_type_ids does. Weights: the decoder's keys under "model.language_model.", every
layer and the final norm included, so the test can show the encoder never asks for layer 3 or the norm.
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import lowp, pass_dtype, record_f16, seed_everything, transformers_upstream, write_case  # noqa: E402
from qwen3 import randomize  # noqa: E402

from diffusers.modular_pipelines.minimax_h3.encoders import get_qwen3vl_prompt_embeds  # noqa: E402
from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration  # noqa: E402

PREFIX = "model.language_model."
LAYER = 3  # hidden_states[3] of 4 layers (upstream: [50] of 64)
# text_config as VL_TINY in qwen3.py with one more layer; vision tower tiny (it is never run for T2VA)
TEXT = dict(vocab_size=89, hidden_size=64, intermediate_size=80, num_hidden_layers=4, num_attention_heads=4,
            num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-6, max_position_embeddings=256,
            rope_parameters={"rope_type": "default", "rope_theta": 5000000.0, "mrope_section": [4, 2, 2],
                             "mrope_interleaved": True})
VISION = dict(depth=1, hidden_size=16, intermediate_size=32, num_heads=2, in_channels=3, patch_size=2,
              spatial_merge_size=2, temporal_patch_size=2, out_hidden_size=64, num_position_embeddings=16,
              deepstack_visual_indexes=[0])
IMAGE_ID, VIDEO_ID, VISION_START, VISION_END = 86, 87, 85, 88


class TextOnlyProcessor:
    """create_mm_token_type_ids as ProcessorMixin: 1 for image pads, 2 for video pads, 0 otherwise."""

    def create_mm_token_type_ids(self, batch):
        return [[1 if t == IMAGE_ID else 2 if t == VIDEO_ID else 0 for t in ids] for ids in batch]


# Another config and seed (issue 19): 5 layers of width 48 (hidden_states[4]), head_dim 24 with mrope [6, 3, 3].
TEXT_OTHER = dict(vocab_size=89, hidden_size=48, intermediate_size=64, num_hidden_layers=5, num_attention_heads=2,
                  num_key_value_heads=1, head_dim=24, rms_norm_eps=1e-6, max_position_embeddings=256,
                  rope_parameters={"rope_type": "default", "rope_theta": 5000000.0, "mrope_section": [6, 3, 3],
                                   "mrope_interleaved": True})
VISION_OTHER = dict(VISION, out_hidden_size=48)


def case(out_dir, name, seed, token_ids, text=TEXT, vision=VISION, layer=LAYER):
    gen = seed_everything(seed)
    cfg = Qwen3VLConfig(text_config=text, vision_config=vision, image_token_id=IMAGE_ID, video_token_id=VIDEO_ID,
                        vision_start_token_id=VISION_START, vision_end_token_id=VISION_END)
    cfg._attn_implementation = "eager"
    model = Qwen3VLForConditionalGeneration(cfg).eval()
    model.config._attn_implementation = "eager"
    randomize(model, gen)
    assert all(t < VISION_START for t in token_ids)
    weights = {k: v for k, v in model.state_dict().items() if k.startswith(PREFIX)}
    run = lowp(model)
    out = get_qwen3vl_prompt_embeds(run, TextOnlyProcessor(), list(token_ids), {}, text_encoder_layer=layer,
                                    device=torch.device("cpu"), dtype=pass_dtype())
    # the layer before, to show the encoder returns exactly hidden_states[layer] and not its neighbour
    with torch.no_grad():
        ids = torch.tensor([token_ids])
        full = run.model(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False,
                         output_hidden_states=True)
    assert f"{PREFIX}layers.{layer}.mlp.up_proj.weight" in weights and f"{PREFIX}norm.weight" in weights
    cfg_dict = cfg.to_dict()
    cfg_dict.pop("_name_or_path", None)
    cfg_dict["text_encoder_layer"] = layer
    write_case(out_dir, "minimax_h3", "text_encoder", name, weights=weights,
               inputs={"ids": torch.tensor([token_ids])},
               outputs={"prompt_embeds": out, f"hidden_states.{layer - 1}": full.hidden_states[layer - 1],
                        "last_hidden_state": full.last_hidden_state},
               config=cfg_dict, seed=seed,
               upstream=f"diffusers modular_pipelines/minimax_h3 (58eb52c0803e) get_qwen3vl_prompt_embeds; "
                        + transformers_upstream())


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True, help="fixture root (test/fixtures/golden)")
    a = ap.parse_args()

    def cases():
        case(a.out, "t2va_13_tokens", 31, [5, 17, 42, 3, 77, 9, 60, 23, 1, 84, 30, 11, 48])
        case(a.out, "t2va_1_token", 32, [40])
        case(a.out, "other_config_7_tokens", 33, [12, 80, 4, 55, 19, 70, 2], TEXT_OTHER, VISION_OTHER, 4)

    record_f16(cases)
