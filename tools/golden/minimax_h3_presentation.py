"""Golden vectors for src/models/minimax_h3/text-encoder/presentation.ts: the token ids and modality tags MiniMax H3's text encoder
reads for a keyframe (FL2VA) or reference (Ref2VA) request: diffusers' MiniMaxH3FL2VATextEncoderStep.__call__ and
MiniMaxH3Ref2VATextEncoderStep.__call__ / _build_presentation (58eb52c0), run with the real Qwen2TokenizerFast on
Kiln's demo byte-level BPE plus the vision special tokens (test/models/minimax_h3-presentation-tokenizer.ts; the
fixtures record its files' sha256). The vision features are stubbed: an image processor that reports given grids, and
a conditioner call that only captures the ids; everything that builds the presentation is upstream's.

Recipe (as root):
  cd /work/main && npx tsc -p tsconfig.test.json --outDir build/golden
  node build/golden/test/models/minimax_h3-presentation-tokenizer.js /opt/reflab/tmp/h3-presentation-tok
  bash ../shared/tools/reflab/run.sh -u diffusers=/opt/upstream/diffusers/src -- \
    python3 /project/tools/golden/minimax_h3_presentation.py --tokenizer /tmp/h3-presentation-tok --out /project/test/fixtures/golden
Writes minimax_h3/presentation/<case>.safetensors (no weights, no inputs): config = the request (task, prompt, per
keyframe / reference its kind, vision token count, soundtrack and block timestamps) and the tokenizer files' sha256;
output.token_ids, output.token_tags.
"""
import argparse
import hashlib
import os
import sys
from types import SimpleNamespace

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import diffusers_upstream, write_case  # noqa: E402

import diffusers.modular_pipelines.minimax_h3.encoders as enc  # noqa: E402
from transformers import Qwen2TokenizerFast  # noqa: E402

MODEL, COMPONENT = "minimax_h3", "presentation"
CAPTURED = {}


def fake_embeds(text_encoder, processor, token_ids, vision_inputs, **_kw):
    CAPTURED["ids"] = list(token_ids)
    return torch.zeros(1, len(token_ids), 1)


enc.get_qwen3vl_prompt_embeds = fake_embeds  # the conditioner call: only the ids are wanted


class ImageProcessor:
    merge_size = 2

    def __init__(self, grids):
        self.grids = grids

    def __call__(self, images, return_tensors="pt"):
        return {"pixel_values": torch.zeros(1), "image_grid_thw": torch.tensor(self.grids)}


def components(tokenizer, grids=()):
    return SimpleNamespace(tokenizer=tokenizer, processor=SimpleNamespace(image_processor=ImageProcessor(list(grids))),
                           text_encoder=SimpleNamespace(dtype=torch.float32), text_encoder_layer=50,
                           _execution_device="cpu", text_tag=1, video_tag=0, fps=24)


def run_step(step_cls, comps, block, extra=None):
    holder = {}
    me = SimpleNamespace(get_block_state=lambda state: block, set_block_state=lambda state, bs: holder.update(bs=bs),
                         **(extra or {}))
    step_cls.__call__(me, comps, None)
    return CAPTURED.pop("ids"), holder["bs"].text_token_tags.tolist()


def fl2va(name, tok, prompt, grids):
    """grids: the Qwen3-VL image grid (t, h/16, w/16) of each keyframe; tokens = t h w / 4."""
    ids, tags = run_step(enc.MiniMaxH3FL2VATextEncoderStep, components(tok, grids),
                         SimpleNamespace(prompt=prompt, keyframes=[object()] * len(grids)))
    write(name, {"task": "fl2va", "prompt": prompt, "keyframe_tokens": [g[0] * g[1] * g[2] // 4 for g in grids]}, ids, tags)


def ref2va(name, tok, prompt, refs):
    """refs: ("image", tokens) | ("audio",) | ("video", has_audio, tokens per block, [timestamps])."""
    references, image_counts, video_counts, video_times, spec = [], [], [], [], []
    for r in refs:
        if r[0] == "image":
            references.append(SimpleNamespace(kind="image", has_audio=False))
            image_counts.append(r[1])
            spec.append({"kind": "image", "vision_tokens": r[1]})
        elif r[0] == "audio":
            references.append(SimpleNamespace(kind="audio", has_audio=True))
            spec.append({"kind": "audio"})
        else:
            references.append(SimpleNamespace(kind="video", has_audio=r[1]))
            video_counts.append(r[2])
            video_times.append(r[3])
            spec.append({"kind": "video", "has_audio": r[1], "vision_tokens": r[2], "timestamps": r[3]})
    step = enc.MiniMaxH3Ref2VATextEncoderStep
    extra = {"_gather_vision_features": lambda processor, refs_, fps: ({}, image_counts, video_counts, video_times),
             "_build_presentation": step._build_presentation}
    ids, tags = run_step(step, components(tok), SimpleNamespace(prompt=prompt, normalized_references=references), extra)
    write(name, {"task": "ref2va", "prompt": prompt, "references": spec}, ids, tags)


def write(name, request, ids, tags):
    request["tokenizer_sha256"] = TOKENIZER_SHA
    write_case(ARGS.out, MODEL, COMPONENT, name, weights={}, inputs={},
               outputs={"token_ids": torch.tensor(ids, dtype=torch.float32), "token_tags": torch.tensor(tags, dtype=torch.float32)},
               config=request, upstream=UPSTREAM, seed=0)
    print(f"{name}: {len(ids)} tokens, {sum(1 for t in tags if t == 0)} tagged video")


def main():
    global ARGS, UPSTREAM, TOKENIZER_SHA
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--commit", default="58eb52c0803ea9af3abec60841c2a093bdf1f951")
    ARGS = ap.parse_args()
    UPSTREAM = diffusers_upstream(ARGS.commit) + " MiniMaxH3FL2VATextEncoderStep / MiniMaxH3Ref2VATextEncoderStep"
    TOKENIZER_SHA = {f: hashlib.sha256(open(os.path.join(ARGS.tokenizer, f), "rb").read()).hexdigest()
                     for f in sorted(os.listdir(ARGS.tokenizer))}
    tok = Qwen2TokenizerFast.from_pretrained(ARGS.tokenizer)
    fl2va("fl2va_first", tok, "A cat walks through the garden.", [(1, 4, 6)])
    fl2va("fl2va_first_last", tok, "The camera moves slowly to the left, then the sun is shining.", [(1, 6, 4), (1, 4, 4)])
    ref2va("ref2va_images", tok, "<Picture 1> and <Picture 2> meet in the garden.", [("image", 12), ("image", 6)])
    ref2va("ref2va_images_voice", tok, "<Subject 1> speaks with the voice of <Audio 1>: <d>[English] Hello, how are you?</d>",
           [("image", 8), ("audio",), ("image", 4)])
    ref2va("ref2va_voice_first", tok, "Hello.", [("audio",), ("audio",), ("image", 2)])
    # videos: one with a soundtrack (its <Audio 1> label first), blocks at mean pair timestamps (0.25 renders as 0.2,
    # 0.75 as 0.8, 1.25 as 1.2: Python rounds exact ties to even), and one without
    ref2va("ref2va_videos", tok, "The dog from <Video 1> runs as in <Video 2>.",
           [("video", True, 3, [0.25, 0.75, 1.25, 1.75]), ("image", 2), ("video", False, 2, [0.25, 2.35])])


if __name__ == "__main__":
    main()
