"""Golden vectors for src/models/krea2/conditioner.ts: Krea 2's prompt encoding (krea-ai/krea-2 encoder.py,
Qwen3VLConditioner.forward) on a tiny Qwen3-VL text model, with the real Qwen3-VL-4B tokenizer.

Upstream (read, never copied into this repository):
  krea-ai/krea-2 @ db3984fbc6e13b34c0064990fc2d95ac64d00058 encoder.py: the fixed template (system prefix + user
      turn, then the prompt; the 5-token suffix tokenized apart), padding="max_length" to max_length + 34 - 5 with
      truncation, the suffix appended after the pads, hidden_states at select_layers stacked on a new axis, the
      first 34 rows dropped
Run from the checkout, as root, one lab run at a time:

  cd /work/main && flock /tmp/kiln-reflab.lock bash /work/shared/tools/reflab/run.sh -u krea2=/tmp/krea2-up \
      -u tok=/work/shared/upstream/krea-2/text_encoder_Qwen3-VL-4B-Instruct -- \
      python3 /project/tools/golden/krea2_text.py --out /project/test/fixtures/golden

Qwen3VLConditioner.forward runs unchanged on an instance made without its __init__ (which downloads the 4B model):
its tokenizer and processor are the real Qwen3-VL-4B-Instruct tokenizer (vocab.json, merges.txt,
tokenizer_config.json from shared/upstream/krea-2), its `qwen` a wrapper around a tiny random
Qwen3VLForConditionalGeneration that
  - maps every id to id % vocab (the tiny model has 97 embeddings; the real ids are stored, the test maps them too);
  - passes the text-only position ids of the transformers release krea-2 pins (4.57.1, pyproject.toml):
    attention_mask.cumsum(-1) - 1, pads at 0 (get_rope_index's text branch), which the lab's transformers 5.x no
    longer computes itself (it would number the suffix after the pads). diffusers' Krea 2 pipeline passes the same
    positions explicitly (shared/spec/krea2.md §2).
Writes krea2/conditioner/<case>.safetensors:
  weight.model.language_model.*        the decoder under Qwen3VLForConditionalGeneration's key prefix
  input.prompt_codepoints              the prompt
  input.select_layers (n), input.max_length (1), input.vocab_mod (1)
  output.input_ids (1, max_length + 34), output.attention_mask   what the tokenizer and processor gave (real ids)
  output.hiddens (1, max_length, n, hidden), output.mask (1, max_length)   the conditioner's return values
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import lowp, record_f16, seed_everything, transformers_upstream, write_case  # noqa: E402

from transformers import AutoTokenizer, Qwen2TokenizerFast, Qwen3VLConfig, Qwen3VLForConditionalGeneration  # noqa: E402

import encoder  # noqa: E402  (krea-ai/krea-2 encoder.py)

TOKENIZER_DIR = "/upstream/tok"
UPSTREAM = "krea-ai/krea-2@db3984fbc6e13b34c0064990fc2d95ac64d00058 encoder.py Qwen3VLConditioner.forward"

TEXT_TINY = dict(vocab_size=97, hidden_size=32, intermediate_size=48, num_hidden_layers=5, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=8, rms_norm_eps=1e-6, max_position_embeddings=1024,
                 rope_parameters={"rope_type": "default", "rope_theta": 5000000.0, "mrope_section": [2, 1, 1],
                                  "mrope_interleaved": True})
VISION_TINY = dict(depth=1, hidden_size=16, intermediate_size=16, num_heads=2, out_hidden_size=32, patch_size=16,
                   spatial_merge_size=2, temporal_patch_size=2, num_position_embeddings=16, deepstack_visual_indexes=[])


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


class TinyQwen(torch.nn.Module):
    """Stands in for the 4B Qwen3VLForConditionalGeneration: real ids folded into the tiny vocabulary, and the text
    positions transformers 4.57 derived from the attention mask."""

    def __init__(self, model, vocab):
        super().__init__()
        self.model, self.vocab = model, vocab

    @property
    def device(self):
        return torch.device("cpu")

    def forward(self, input_ids, attention_mask, output_hidden_states):
        pos = attention_mask.long().cumsum(-1) - 1
        pos = pos.masked_fill(attention_mask == 0, 0)
        pos = pos[None].expand(3, -1, -1)
        return self.model(input_ids=input_ids % self.vocab, attention_mask=attention_mask, position_ids=pos,
                          output_hidden_states=output_hidden_states)


def conditioner(model, vocab, max_length, select_layers):
    c = encoder.Qwen3VLConditioner.__new__(encoder.Qwen3VLConditioner)
    torch.nn.Module.__init__(c)
    c.qwen = TinyQwen(model, vocab)
    c.tokenizer = AutoTokenizer.from_pretrained(TOKENIZER_DIR, max_length=max_length)
    c.processor = Qwen2TokenizerFast.from_pretrained(TOKENIZER_DIR, max_length=max_length)
    c.max_length = max_length
    c.select_layers = select_layers
    c.prompt_template_encode_prefix = ("<|im_start|>system\nDescribe the image by detailing the color, shape, size, "
                                       "texture, quantity, text, spatial relationships of the objects and "
                                       "background:<|im_end|>\n<|im_start|>user\n")
    c.prompt_template_encode_suffix = "<|im_end|>\n<|im_start|>assistant\n"
    c.prompt_template_encode_start_idx = 34
    c.prompt_template_encode_suffix_start_idx = 5
    return c


def check_template(c):
    """The strings set above are encoder.py's (its __init__ sets them; read them back from the source)."""
    import inspect
    src = inspect.getsource(encoder.Qwen3VLConditioner.__init__)
    for s in (c.prompt_template_encode_prefix, c.prompt_template_encode_suffix):
        assert repr(s)[1:-1].replace("'", '"') in src or s.replace("\n", "\\n") in src, f"template {s!r} not in encoder.py"
    assert "prompt_template_encode_start_idx = 34" in src and "prompt_template_encode_suffix_start_idx = 5" in src


def case(out, name, seed, prompt, max_length=512, select_layers=(1, 2, 4), text=TEXT_TINY):
    gen = seed_everything(seed)
    cfg = Qwen3VLConfig(text_config=text, vision_config=VISION_TINY, image_token_id=92, video_token_id=93,
                        vision_start_token_id=94, vision_end_token_id=95, tie_word_embeddings=False)
    cfg._attn_implementation = "eager"
    model = Qwen3VLForConditionalGeneration(cfg).eval()
    randomize(model.model.language_model, gen)
    c = conditioner(lowp(model), text["vocab_size"], max_length, tuple(select_layers))
    check_template(c)
    ids = {}
    orig = c.qwen.forward

    def spy(input_ids, attention_mask, output_hidden_states):
        ids["input_ids"], ids["attention_mask"] = input_ids, attention_mask
        return orig(input_ids, attention_mask, output_hidden_states)

    c.qwen.forward = spy
    with torch.no_grad():
        hiddens, mask = c([prompt])
    config = cfg.to_dict()
    config.pop("_name_or_path", None)
    print(f"{name}: {int(ids['attention_mask'].sum())} tokens, {int(mask.sum())} kept")
    write_case(out, "krea2", "conditioner", name,
               weights={"model.language_model." + k: v for k, v in model.model.language_model.state_dict().items()},
               inputs={"prompt_codepoints": torch.tensor([ord(ch) for ch in prompt], dtype=torch.float32),
                       "select_layers": torch.tensor(list(select_layers)), "max_length": torch.tensor([max_length]),
                       "vocab_mod": torch.tensor([text["vocab_size"]])},
               outputs={"input_ids": ids["input_ids"], "attention_mask": ids["attention_mask"],
                        "hiddens": hiddens, "mask": mask.float()},
               config=config, upstream=f"{UPSTREAM}; {transformers_upstream()}", seed=seed)


LONG = ("An oil painting of a lighthouse on a basalt cliff at dusk, thick impasto strokes, the sea below in "
        "cobalt and viridian, gulls circling, a keeper's cottage with one lit window, storm clouds rolling in "
        "from the west, ") * 6

TEXT_OTHER = dict(TEXT_TINY, hidden_size=24, num_hidden_layers=3, num_attention_heads=2, num_key_value_heads=1,
                  head_dim=12, rope_parameters={"rope_type": "default", "rope_theta": 5000000.0,
                                                "mrope_section": [2, 2, 2], "mrope_interleaved": True})


def main(out):
    case(out, "short_prompt", 1, "A red fox in fresh snow, watercolor", max_length=512)
    case(out, "pads_small_max_length", 2, "Neon sign reading \"OPEN 24/7\" above a café, rain, 35mm photo",
         max_length=40)
    case(out, "truncated", 3, LONG, max_length=48)
    case(out, "leading_newline_unicode", 4, "\n  Ein Bergsee im Morgennebel — 朝の湖", max_length=40,
         select_layers=(0, 2, 3, 4))
    case(out, "other_config", 5, "a tiny robot", max_length=24, select_layers=(1, 2), text=TEXT_OTHER)
    # the last hidden state (transformers' last_hidden_state, after the final norm), a negative index, out of order
    case(out, "last_hidden_state_taps", 6, "a lighthouse at dusk", max_length=24, select_layers=(5, 1, -2))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True, help="fixture root (test/fixtures/golden)")
    a = ap.parse_args()
    record_f16(lambda: main(a.out))
