"""Golden vectors for src/models/qwen3 (transformers Qwen3Model, Qwen3VLTextModel) and src/models/tokenizer.

Run in the reference lab from the checkout (transformers is the lab's own, nothing under -u):
  bash ../shared/tools/reflab/run.sh -- python3 /project/tools/golden/qwen3.py --out /project/test/fixtures/golden
Writes
  qwen3/decoder/*.safetensors          Qwen3Model forward: embeddings, hidden state after every layer, final norm
  qwen3/decode/*.safetensors           the same model through a DynamicCache: prefill, then one token per step
  qwen3_vl_text/decoder/*.safetensors  Qwen3VLTextModel: interleaved MRoPE (3 position rows), deepstack, embeds in
  qwen3_vl_text/decode/*.safetensors   prefill + decode with MRoPE positions
and, with --tokenizer DIR (vocab.json + merges.txt + tokenizer_config.json), the ids Qwen2Tokenizer gives for
test/models/tokenizer.test.ts's strings (--tokenizer-out FILE).
Weights are re-drawn so activations are O(1) and attention is far from uniform (the default init's 0.02 would
leave softmax nearly flat and hide mask or RoPE errors). Weight keys are the real checkpoints' own:
Qwen3ForCausalLM puts the decoder under "model.", Qwen3VLForConditionalGeneration under "model.language_model.".
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import lowp, pass_dtype, record_f16, seed_everything, transformers_upstream, write_case  # noqa: E402

from transformers import Qwen3Config, Qwen3Model  # noqa: E402
from transformers.cache_utils import DynamicCache  # noqa: E402
from transformers.models.qwen3_vl.configuration_qwen3_vl import Qwen3VLTextConfig  # noqa: E402
from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLTextModel  # noqa: E402

PREFIX = {"qwen3": "model.", "qwen3_vl_text": "model.language_model."}


def randomize(model: torch.nn.Module, gen: torch.Generator) -> None:
    """Linear weights ~ N(0, 1/fan_in), embeddings ~ N(0, 1), norm weights ~ U(0.5, 1.5) (QK-norm U(0.5, 2.5))."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                hi = 2.5 if ("q_norm" in name or "k_norm" in name) else 1.5
                p.copy_(0.5 + (hi - 0.5) * torch.rand(p.shape, generator=gen))
            elif "embed_tokens" in name:
                p.copy_(torch.randn(p.shape, generator=gen))
            elif p.dim() == 2:
                p.copy_(torch.randn(p.shape, generator=gen) / p.shape[1] ** 0.5)
            else:  # biases (attention_bias configs)
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))


def weights_of(model, family):
    return {PREFIX[family] + k: v for k, v in model.state_dict().items()}


def config_dict(cfg):
    d = cfg.to_dict()
    d.pop("_name_or_path", None)
    return d


def build(family, seed, **kw):
    gen = seed_everything(seed)
    if family == "qwen3":
        cfg = Qwen3Config(**kw)
        model = Qwen3Model(cfg)
    else:
        cfg = Qwen3VLTextConfig(**kw)
        model = Qwen3VLTextModel(cfg)
    cfg._attn_implementation = "eager"
    model.config._attn_implementation = "eager"
    model.eval()
    randomize(model, gen)
    return cfg, model, gen


def run_with_hidden(model, **kwargs):
    """Forward that also captures every decoder layer's output (pre final norm)."""
    captured = []
    hooks = [layer.register_forward_hook(lambda _m, _i, out: captured.append(out[0] if isinstance(out, tuple) else out))
             for layer in model.layers]
    try:
        with torch.no_grad():
            out = model(**kwargs)
    finally:
        for h in hooks:
            h.remove()
    return out, captured


def padded_in_f64(attention_mask):
    """The float64 pass skips padded cases: eager attention adds finfo(float64).min to masked scores, which overflows
    to -inf on fully masked padding rows, whose NaN then reaches every row through 0 x NaN. Those cases record no
    f32_error (their f32 comparisons keep the stated tolerance)."""
    return attention_mask is not None and pass_dtype() == torch.float64


def decoder_case(out_dir, family, case, seed, cfg_kw, batch, length, *, positions=None, attention_mask=None,
                 deepstack=None, embeds_input=False):
    if padded_in_f64(attention_mask):
        return
    cfg, model, gen = build(family, seed, **cfg_kw)
    ids = torch.randint(0, cfg.vocab_size, (batch, length), generator=gen)
    inputs = {}
    kwargs = {}
    if embeds_input:
        embeds = torch.randn(batch, length, cfg.hidden_size, generator=gen)
        inputs["inputs_embeds"] = embeds
        kwargs["inputs_embeds"] = embeds
    else:
        inputs["ids"] = ids
        kwargs["input_ids"] = ids
    if positions is not None:
        inputs["position_ids"] = positions
        kwargs["position_ids"] = positions
    if attention_mask is not None:
        inputs["attention_mask"] = attention_mask
        kwargs["attention_mask"] = attention_mask
    if deepstack is not None:
        mask, n_layers = deepstack
        visual = [torch.randn(int(mask.sum()), cfg.hidden_size, generator=gen) for _ in range(n_layers)]
        kwargs["visual_pos_masks"] = mask
        kwargs["deepstack_visual_embeds"] = visual
        inputs["visual_pos_mask"] = mask
        for i, v in enumerate(visual):
            inputs[f"deepstack.{i}"] = v
    run, kwargs = lowp(model), lowp(kwargs)  # float16 in record_f16's first pass
    out, hidden = run_with_hidden(run, **kwargs)
    outputs = {"hidden_states.0": kwargs.get("inputs_embeds", run.embed_tokens(ids) if not embeds_input else None)}
    if deepstack is not None:
        # hooks see a layer's output before the deepstack add; the model's state after layer i includes it
        mask = kwargs["visual_pos_masks"]
        for i, v in enumerate(kwargs["deepstack_visual_embeds"]):
            hidden[i] = hidden[i].clone()
            hidden[i][mask] += v
    for i, h in enumerate(hidden):
        outputs[f"hidden_states.{i + 1}"] = h
    outputs["last_hidden_state"] = out.last_hidden_state
    write_case(out_dir, family, "decoder", case, weights=weights_of(model, family), inputs=inputs, outputs=outputs,
               config=config_dict(cfg), upstream=transformers_upstream(), seed=seed)


def decode_case(out_dir, family, case, seed, cfg_kw, length, prefill, *, positions=None, attention_mask=None):
    """Prefill `prefill` tokens into a DynamicCache, then one token per call; output.last_hidden_state is the
    concatenation of every call's final-norm output. attention_mask (1, length) marks padding (0)."""
    if padded_in_f64(attention_mask):
        return
    cfg, model, gen = build(family, seed, **cfg_kw)
    ids = torch.randint(0, cfg.vocab_size, (1, length), generator=gen)
    cache = DynamicCache(config=cfg)
    pieces = []
    bounds = [(0, prefill)] + [(t, t + 1) for t in range(prefill, length)]
    run = lowp(model)
    with torch.no_grad():
        for a, b in bounds:
            kw = {"input_ids": ids[:, a:b], "past_key_values": cache, "use_cache": True}
            if positions is not None:
                kw["position_ids"] = positions[..., a:b]
            if attention_mask is not None:
                kw["attention_mask"] = attention_mask[:, :b]  # past and new tokens
            pieces.append(run(**kw).last_hidden_state)
    inputs = {"ids": ids, "prefill_length": torch.tensor([prefill])}
    if positions is not None:
        inputs["position_ids"] = positions
    if attention_mask is not None:
        inputs["attention_mask"] = attention_mask
    write_case(out_dir, family, "decode", case, weights=weights_of(model, family), inputs=inputs,
               outputs={"last_hidden_state": torch.cat(pieces, dim=1)}, config=config_dict(cfg),
               upstream=transformers_upstream(), seed=seed)


def vision_positions(n_text_before, grid, n_text_after):
    """Qwen3-VL style (t, h, w) rows for [text | image grid t*h*w | text], as get_rope_index lays them out."""
    t, h, w = grid
    rows = [[], [], []]
    for i in range(n_text_before):
        for r in rows:
            r.append(i)
    start = n_text_before
    for ti in range(t):
        for hi in range(h):
            for wi in range(w):
                rows[0].append(start + ti)
                rows[1].append(start + hi)
                rows[2].append(start + wi)
    nxt = start + max(t, h, w)
    for i in range(n_text_after):
        for r in rows:
            r.append(nxt + i)
    return torch.tensor(rows)[:, None, :]  # (3, 1, L)


QWEN3_TINY = dict(vocab_size=97, hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-6, max_position_embeddings=256,
                  rope_parameters={"rope_type": "default", "rope_theta": 10000.0}, tie_word_embeddings=False)
# head_dim * heads (128) != hidden (64), as in real Qwen3 checkpoints; theta as Qwen3-TTS
QWEN3_WIDE_HEADS = dict(QWEN3_TINY, num_hidden_layers=2, head_dim=32, num_key_value_heads=1,
                        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0})
# mrope [24, 20, 20] of 64 pairs scaled to 8 pairs: [4, 2, 2] keeps the interleave pattern (t h w t h w t t)
VL_TINY = dict(vocab_size=89, hidden_size=64, intermediate_size=80, num_hidden_layers=3, num_attention_heads=4,
               num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-6, max_position_embeddings=256,
               rope_parameters={"rope_type": "default", "rope_theta": 5000000.0, "mrope_section": [4, 2, 2],
                                "mrope_interleaved": True})


# Cases at other configs and seeds (issue 19): 6 query heads over 2 KV heads of 8, theta 1e6; and a Qwen3-VL text
# model whose head_dim 24 splits its 12 rotary pairs as mrope [6, 3, 3].
QWEN3_OTHER = dict(vocab_size=61, hidden_size=48, intermediate_size=72, num_hidden_layers=2, num_attention_heads=6,
                   num_key_value_heads=2, head_dim=8, rms_norm_eps=1e-6, max_position_embeddings=256,
                   rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}, tie_word_embeddings=False)
VL_OTHER = dict(vocab_size=53, hidden_size=40, intermediate_size=56, num_hidden_layers=2, num_attention_heads=2,
                num_key_value_heads=1, head_dim=24, rms_norm_eps=1e-6, max_position_embeddings=256,
                rope_parameters={"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": [6, 3, 3],
                                 "mrope_interleaved": True})


def golden_models(out_dir):
    decoder_case(out_dir, "qwen3", "tiny", 1, QWEN3_TINY, batch=1, length=11)
    decoder_case(out_dir, "qwen3", "wide_heads_batch2", 2, QWEN3_WIDE_HEADS, batch=2, length=7)
    pad = 3
    mask = torch.tensor([[0] * pad + [1] * 7])
    decoder_case(out_dir, "qwen3", "left_padded", 3, QWEN3_TINY, batch=1, length=pad + 7,
                 positions=torch.clamp(torch.cumsum(mask, -1) - 1, min=0), attention_mask=mask)
    decode_case(out_dir, "qwen3", "prefill5_steps4", 4, QWEN3_TINY, length=9, prefill=5)
    mask = torch.tensor([[0, 0, 1, 1, 1, 1, 1, 1, 1]])
    decode_case(out_dir, "qwen3", "left_padded_prefill5_steps4", 5, QWEN3_TINY, length=9, prefill=5,
                positions=torch.clamp(torch.cumsum(mask, -1) - 1, min=0), attention_mask=mask)

    decoder_case(out_dir, "qwen3_vl_text", "text_positions", 11, VL_TINY, batch=1, length=9)
    pos = vision_positions(3, (1, 2, 3), 2)
    vis = torch.zeros(1, pos.shape[-1], dtype=torch.bool)
    vis[0, 3:9] = True
    decoder_case(out_dir, "qwen3_vl_text", "vision_positions_deepstack", 12, VL_TINY, batch=1, length=pos.shape[-1],
                 positions=pos, deepstack=(vis, 2))
    decoder_case(out_dir, "qwen3_vl_text", "embeds_input", 13, VL_TINY, batch=1, length=6, embeds_input=True,
                 positions=vision_positions(1, (1, 1, 3), 2))
    pos = vision_positions(2, (1, 2, 2), 4)
    decode_case(out_dir, "qwen3_vl_text", "mrope_prefill6_steps4", 14, VL_TINY, length=pos.shape[-1], prefill=6,
                positions=pos)

    decoder_case(out_dir, "qwen3", "other_config_gqa3", 6, QWEN3_OTHER, batch=1, length=13)
    decode_case(out_dir, "qwen3", "other_config_prefill3_steps5", 7, QWEN3_OTHER, length=8, prefill=3)
    pos = vision_positions(2, (1, 3, 2), 3)
    vis = torch.zeros(1, pos.shape[-1], dtype=torch.bool)
    vis[0, 2:8] = True
    decoder_case(out_dir, "qwen3_vl_text", "other_config_mrope_6_3_3", 15, VL_OTHER, batch=1, length=pos.shape[-1],
                 positions=pos, deepstack=(vis, 1))


# Strings whose ids the tokenizer test compares (kept here so the fixture records exactly what was encoded).
TOKENIZER_STRINGS = [
    "Hello, world! This is a test.",
    "The quick brown fox jumps over the lazy dog 1234567890 times.",
    "你好，世界！今天天气很好，我们去公园散步吧。",
    "こんにちは、世界。カタカナとひらがなと漢字。",
    "안녕하세요, 세계! 한국어 문장입니다.",
    "Grüße aus München: Äpfel, Öl und Straße.",
    "Привет, мир! Съешь же ещё этих мягких французских булок.",
    "Emoji: 😀🎉👍🏽 👨‍👩‍👧‍👦 ❤️🔥",
    "digits 3.14159 2,718 1000000 007 ٣٤٥ ⅫⅣ",
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
    "   leading spaces, double  spaces,\ttabs\t\tand\n\n\nnewlines   \n  trailing   ",
    "def f(x):\n    return {'a': [x ** 2 for x in range(10)]}  # comment\n",
    "I'm sure it's what they've said; we'll see, he'd know. DON'T SHOUT",
    "e\u0301 vs \u00e9, Å vs A\u030a (NFC)",
    "<|endoftext|><|audio_start|><tts_pad><tts_text_bos><|audio_end|><|image_pad|><|vision_start|><think>x</think>",
    "<d>lyrics</d><|cutoff|><|caption_start|>a cat<|caption_end|>",
    "",
    " ",
    "a",
    "Mixed 中文 and English, 日本語 too; الْعَرَبِيَّة and हिन्दी.",
]


def golden_tokenizer(tok_dir, out_file):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tok_dir)
    cases = [{"text": s, "ids": tok(s, add_special_tokens=True)["input_ids"]} for s in TOKENIZER_STRINGS]
    added = {t: i for t, i in sorted(tok.get_added_vocab().items(), key=lambda kv: kv[1])}
    doc = {
        "upstream": transformers_upstream() + f", {type(tok).__name__}",
        "tokenizer": os.path.basename(os.path.normpath(tok_dir)),
        "vocab_size": len(tok),
        "added_tokens": added,
        "cases": cases,
    }
    os.makedirs(os.path.dirname(out_file), exist_ok=True)
    with open(out_file, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {out_file} ({len(cases)} strings, {len(tok)} tokens)")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", help="fixture root (test/fixtures/golden)")
    ap.add_argument("--tokenizer", help="folder with vocab.json, merges.txt, tokenizer_config.json")
    ap.add_argument("--tokenizer-out", help="JSON file for the tokenizer's golden ids")
    a = ap.parse_args()
    if a.out:
        record_f16(lambda: golden_models(a.out))
    if a.tokenizer:
        golden_tokenizer(a.tokenizer, a.tokenizer_out)
