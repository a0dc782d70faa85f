"""Golden vectors for src/models/qwen_image21/text-encoder.ts: the prompt encoding of diffusers' QwenImage21Pipeline
(`_get_qwen_prompt_embeds`, pipeline_qwenimage21.py at 0a1f3676, the version merged with huggingface/diffusers#14804)
on a tiny Qwen3-VL.

Run in the reference lab from the checkout (one lab run at a time; --cases t2i|refs|all, default all):
  flock /tmp/kiln-reflab.lock bash ../shared/tools/reflab/run.sh -u diffusers=/opt/upstream/diffusers-qi21/src -- \
    python3 /project/tools/golden/qwen_image21_text.py --out /project/test/fixtures/golden --cases refs
Writes qwen_image21/text_encoder/<case>.safetensors with
  weight.model.language_model.*   the decoder, under Qwen3VLForConditionalGeneration's own key prefix
  input.ids (B, L), input.attention_mask (B, L)   the processor's output: left-padded ids (the pipeline passes
                                  padding_side="left", "as the checkpoint was trained with")
  input.drop_idx (1)              leading system-turn tokens the pipeline drops
  input.prompt_codepoints, input.template_codepoints   a prompt and the t2i template string built from it
  output.prompt_embeds (B, Lout, H)  the pipeline's conditioning, zero-padded to the longest prompt
  output.encoder_attention_mask (B, Lout)
Reference cases (`--cases refs`, qwen_image21/text_encoder/refs*.safetensors): the image-conditioned path of the same
function: the ti2i template with one "<imagei><|vision_start|><|image_pad|><|vision_end|>" block per image (joined
by " ", then the prompt verbatim), the images through
Qwen2VLImageProcessor (which expands each <|image_pad|> to its merged-token count) and the whole
Qwen3VLForConditionalGeneration forward (vision tower, embeds spliced in, deepstack, 3D MRoPE). Extra tensors:
  weight.model.visual.*            the vision tower (tools/golden/qwen3_vl_vision.py's structure, patch 8 to stay small)
  input.image_<i> (H, W, 3)        8-bit RGB, the already resized references; input.min_pixels / max_pixels
  input.grid_thw (N, 3)            the processor's image_grid_thw
  output.position_ids (3, L)       Qwen3VLModel.get_rope_index
  output.image_pad_mask (1, Lout)  the pipeline's mask of <|image_pad|> rows in the conditioning (rows are kept)
The pipeline's few steps are redone here on ids (the whole pipeline runs in tools/golden/qwen_image21_pipeline.py):
the template is formatted, the text encoder runs on (input_ids, attention_mask) with output_hidden_states, the masked
rows of each prompt are kept and their first drop_idx rows dropped. The hidden state is the last decoder layer's
output *before* the final norm: what `hidden_states[-1]` was in transformers 4.57, which the checkpoint is tuned to
(docs/models/qwen-image-2.1.md); the pipeline neutralises the norm with a forward hook for transformers 5.x, the same
as the layer-output hook here, and the script checks that the two differ exactly by the final norm.
Token ids come from a fixed list (no tokenizer at the tiny vocabulary): the ids stand in for the template's pieces
with the real tokenizer's piece count for the system turn (14: Qwen3-VL's tokenizer, checked in the lab on the
Krea 2 copy of it, gives [151644, 8948, 198, 1092, 30782, 408, 323, 23643, 279, 3897, 9934, 13, 151645, 198],
the same ids for the raw string and for apply_chat_template on the system message).
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import lowp, pass_dtype, record_f16, seed_everything, transformers_upstream, write_case  # noqa: E402

from qwen3_vl_vision import process, random_rgb, randomize_visual, MIN_PIXELS, MAX_PIXELS  # noqa: E402
from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration  # noqa: E402

SYS_PROMPT = "Comprehend and analyze the provided prompt."
TEMPLATE_T2I = (f"<|im_start|>system\n{SYS_PROMPT}<|im_end|>\n"
                "<|im_start|>user\n{}<|im_end|>\n"
                "<|im_start|>assistant\n")
PIPELINE = "huggingface/diffusers pipeline_qwenimage21.py @ 0a1f36769ccdd9a3db6adf27d5e54cc6ebd2dee0 (t2i prompt encoding)"

# Stand-in ids for the template's pieces (vocab 97): the system turn has the real tokenizer's 14 pieces
# (<|im_start|> system \n Comp re hend ' and' ' analyze' ' the' ' provided' ' prompt' . <|im_end|> \n).
IM_START, IM_END, NL, PAD = 90, 91, 7, 0
SYSTEM_IDS = [IM_START, 11, NL, 40, 41, 42, 43, 44, 45, 46, 47, 48, IM_END, NL]
USER_IDS = [IM_START, 12, NL]
ASSISTANT_IDS = [IM_END, NL, IM_START, 13, NL]

VL_TEXT_TINY = dict(vocab_size=97, hidden_size=64, intermediate_size=80, num_hidden_layers=3, num_attention_heads=4,
                    num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-6, max_position_embeddings=256,
                    rope_parameters={"rope_type": "default", "rope_theta": 5000000.0, "mrope_section": [4, 2, 2],
                                     "mrope_interleaved": True})
VISION_TINY = dict(depth=1, hidden_size=32, intermediate_size=32, num_heads=2, out_hidden_size=64, patch_size=16,
                   spatial_merge_size=2, temporal_patch_size=2, num_position_embeddings=16, deepstack_visual_indexes=[])


TEMPLATE_TI2I_BLOCK = "<image{}><|vision_start|><|image_pad|><|vision_end|>"
VL_TEXT_REFS = dict(VL_TEXT_TINY, intermediate_size=32)
VISION_REFS = dict(depth=3, hidden_size=16, intermediate_size=24, num_heads=2, out_hidden_size=64, patch_size=8,
                   spatial_merge_size=2, temporal_patch_size=2, num_position_embeddings=16,
                   deepstack_visual_indexes=[0, 2], hidden_act="gelu_pytorch_tanh")
IMAGE, VSTART, VEND = 92, 94, 95
LT, IMAGE_WORD, GT, SPACE = 20, 30, 31, 21  # stand-ins for "<", "image", ">", " "; digits are 22 + n


def randomize(model, gen):
    """As tools/golden/qwen3.py: linears ~ N(0, 1/fan_in), embeddings N(0, 1), norms U(0.5, 1.5) (QK-norm to 2.5)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                hi = 2.5 if ("q_norm" in name or "k_norm" in name) else 1.5
                p.copy_(0.5 + (hi - 0.5) * torch.rand(p.shape, generator=gen))
            elif "embed_tokens" in name:
                p.copy_(torch.randn(p.shape, generator=gen))
            elif p.dim() == 2:
                p.copy_(torch.randn(p.shape, generator=gen) / p.shape[1] ** 0.5)


def build(seed, text=VL_TEXT_TINY, vision=VISION_TINY):
    gen = seed_everything(seed)
    cfg = Qwen3VLConfig(text_config=text, vision_config=vision, image_token_id=92, video_token_id=93,
                        vision_start_token_id=94, vision_end_token_id=95, tie_word_embeddings=False)
    cfg._attn_implementation = "eager"
    model = Qwen3VLForConditionalGeneration(cfg).eval()
    randomize(model, gen)
    return cfg, model, gen


def encode(model, ids, mask, drop_idx, **vision):
    """The pipeline's steps after the processor: forward, masked rows per prompt, drop the system turn, zero-pad."""
    captured = {}
    model, vision = lowp(model), lowp(vision)
    lm = model.model.language_model
    hook = lm.layers[-1].register_forward_hook(lambda _m, _i, out: captured.__setitem__("h", out[0] if isinstance(out, tuple) else out))
    try:
        with torch.no_grad():
            out = model(input_ids=ids, attention_mask=mask, output_hidden_states=True, **vision)
    finally:
        hook.remove()
    pre_norm = captured["h"]
    with torch.no_grad():
        normed = lm.norm(pre_norm)
    last = out.hidden_states[-1]
    real = mask.bool()  # padding rows may be NaN in the float64 pass
    which = ("pre-norm" if torch.equal(last[real], pre_norm[real]) else
             "normed" if torch.allclose(last[real], normed[real], atol=1e-2) else "neither")
    print(f"lab transformers hidden_states[-1] is the {which} last layer output; using the pre-norm one")
    assert which != "neither"
    rows = [h[m.bool()][drop_idx:] for h, m in zip(pre_norm, mask)]
    n = max(r.shape[0] for r in rows)
    embeds = torch.stack([torch.cat([r, r.new_zeros(n - r.shape[0], r.shape[1])]) for r in rows])
    out_mask = torch.stack([torch.cat([torch.ones(r.shape[0]), torch.zeros(n - r.shape[0])]) for r in rows])
    return embeds, out_mask


def codepoints(s):
    return torch.tensor([ord(ch) for ch in s], dtype=torch.float32)


def case(out_dir, name, seed, prompts_ids, prompt_text, text=VL_TEXT_TINY):
    if len(prompts_ids) > 1 and pass_dtype() == torch.float64:
        return  # padded: no float64 pass (tools/golden/qwen3.py padded_in_f64)
    cfg, model, _ = build(seed, text)
    seqs = [SYSTEM_IDS + USER_IDS + p + ASSISTANT_IDS for p in prompts_ids]
    width = max(len(s) for s in seqs)
    ids = torch.tensor([[PAD] * (width - len(s)) + s for s in seqs])  # padding_side="left"
    mask = torch.tensor([[0] * (width - len(s)) + [1] * len(s) for s in seqs])
    drop_idx = len(SYSTEM_IDS)
    embeds, out_mask = encode(model, ids, mask, drop_idx)
    config = cfg.to_dict()
    config.pop("_name_or_path", None)
    write_case(out_dir, "qwen_image21", "text_encoder", name,
               weights={"model.language_model." + k: v for k, v in model.model.language_model.state_dict().items()},
               inputs={"ids": ids, "attention_mask": mask, "drop_idx": torch.tensor([drop_idx]),
                       "prompt_codepoints": codepoints(prompt_text),
                       "template_codepoints": codepoints(TEMPLATE_T2I.format(prompt_text))},
               outputs={"prompt_embeds": embeds, "encoder_attention_mask": out_mask},
               config=config, upstream=f"{PIPELINE}; {transformers_upstream()}", seed=seed)


def refs_case(out_dir, name, seed, sizes, prompt_ids, prompt_text, text=VL_TEXT_REFS, vision_cfg=VISION_REFS):
    """One prompt with len(sizes) reference images, as _get_qwen_prompt_embeds runs it (batch 1, no padding)."""
    cfg, model, gen = build(seed, text, vision_cfg)
    randomize(model.model.language_model, gen)
    randomize_visual(model.model.visual, gen)
    images = [random_rgb(gen, h, w) for h, w in sizes]
    pixel_values, grid = process(vision_cfg, images)
    merge = vision_cfg["spatial_merge_size"]
    user = []
    for i, g in enumerate(grid.tolist()):
        label = ([SPACE] if i else []) + [LT, IMAGE_WORD, 22 + i + 1, GT]
        user += label + [VSTART] + [IMAGE] * (g[0] * g[1] * g[2] // merge ** 2) + [VEND]
    seq = SYSTEM_IDS + USER_IDS + user + prompt_ids + ASSISTANT_IDS
    ids = torch.tensor([seq])
    mask = torch.ones_like(ids)
    mm = (ids == IMAGE).int()
    drop_idx = len(SYSTEM_IDS)
    embeds, out_mask = encode(model, ids, mask, drop_idx, pixel_values=pixel_values, image_grid_thw=grid,
                              mm_token_type_ids=mm)
    with torch.no_grad():
        position_ids, _ = model.model.get_rope_index(ids, mm_token_type_ids=mm, image_grid_thw=grid, attention_mask=mask)
    pad_mask = (ids[0][drop_idx:] == IMAGE).float().unsqueeze(0)
    blocks = " ".join(TEMPLATE_TI2I_BLOCK.format(i + 1) for i in range(len(sizes)))
    template = TEMPLATE_T2I.replace("user\n{}", "user\n" + blocks + "{}").format(prompt_text)
    config = cfg.to_dict()
    config.pop("_name_or_path", None)
    weights = {"model.language_model." + k: v for k, v in model.model.language_model.state_dict().items()}
    weights.update({"model.visual." + k: v for k, v in model.model.visual.state_dict().items()})
    inputs = {"ids": ids, "attention_mask": mask, "drop_idx": torch.tensor([drop_idx]), "grid_thw": grid,
              "prompt_codepoints": codepoints(prompt_text), "template_codepoints": codepoints(template),
              "min_pixels": torch.tensor([MIN_PIXELS]), "max_pixels": torch.tensor([float(MAX_PIXELS)])}
    inputs.update({f"image_{i}": im for i, im in enumerate(images)})
    write_case(out_dir, "qwen_image21", "text_encoder", name, weights=weights, inputs=inputs,
               outputs={"prompt_embeds": embeds, "encoder_attention_mask": out_mask, "position_ids": position_ids[:, 0],
                        "image_pad_mask": pad_mask},
               config=config, upstream=f"{PIPELINE_REFS}; {transformers_upstream()}", seed=seed)


PIPELINE_REFS = PIPELINE.replace("t2i prompt encoding", "image-conditioned prompt encoding")
# Other configs and seeds (issue 19): a 2-layer text model with head_dim 24 (mrope [6, 3, 3]); a 2-block tower with 3
# heads of 8 and deepstack at [1] feeding it.
VL_TEXT_OTHER = dict(vocab_size=97, hidden_size=48, intermediate_size=56, num_hidden_layers=2, num_attention_heads=2,
                     num_key_value_heads=1, head_dim=24, rms_norm_eps=1e-6, max_position_embeddings=256,
                     rope_parameters={"rope_type": "default", "rope_theta": 5000000.0, "mrope_section": [6, 3, 3],
                                      "mrope_interleaved": True})
VISION_OTHER = dict(depth=2, hidden_size=24, intermediate_size=32, num_heads=3, out_hidden_size=48, patch_size=8,
                    spatial_merge_size=2, temporal_patch_size=2, num_position_embeddings=36,
                    deepstack_visual_indexes=[1], hidden_act="gelu_pytorch_tanh")

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True, help="fixture root (test/fixtures/golden)")
    ap.add_argument("--cases", choices=["all", "t2i", "refs"], default="all")
    a = ap.parse_args()

    def cases():
        if a.cases in ("all", "t2i"):
            case(a.out, "t2i", 21, [[60, 61, 62, 63, 64, 65, 66, 67, 68]], "A red fox in the snow, 雪の中の狐")
            case(a.out, "batch2_left_padded", 22, [[70, 71, 72, 73, 74, 75, 76], [80, 81]], "two prompts\nof different lengths")
            case(a.out, "other_config_t2i", 25, [[50, 51, 52, 53, 54, 55]], "a lighthouse at dusk", VL_TEXT_OTHER)
        if a.cases in ("all", "refs"):
            refs_case(a.out, "refs1", 23, [(32, 48)], [60, 61, 62, 63, 64], "Put the cat from <image1> on a sofa")
            refs_case(a.out, "refs2", 24, [(32, 48), (48, 32)], [70, 71, 72], "<image1> in the style of <image2>")
            refs_case(a.out, "other_config_refs1", 26, [(48, 32)], [56, 57, 58], "the same scene at night",
                      VL_TEXT_OTHER, VISION_OTHER)

    record_f16(cases)
