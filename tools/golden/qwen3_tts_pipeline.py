"""End-to-end golden of the Qwen3-TTS voice-clone pipeline (issue 19 item 5): upstream's
Qwen3TTSModel.generate_voice_clone on Kiln's demo checkpoint (a tiny random Qwen3-TTS-12Hz Base in the published repo
layout: config.json, generation_config.json, model.safetensors, the tokenizer files, speech_tokenizer/), once with an
x-vector prompt (x_vector_only_mode) and once with an ICL prompt (ref_text + the clip's codes).

Upstream: QwenLM/Qwen3-TTS @ 022e286b98fbec7e1e916cb940cdf532cd9f488e (read, never copied here), its inference wrapper
qwen_tts/inference/qwen3_tts_model.py loaded through shims/qwen3_tts_compat.py (load_inference: transformers 5.x
adaptations only). Recipe (as root; the checkpoint comes from Kiln's own demo writer):

  cd /work/main && npx tsc -p tsconfig.test.json --outDir build/golden
  node build/golden/test/models/e2e-checkpoints.js qwen3_tts /opt/reflab/tmp/e2e/tts
  bash /work/shared/tools/reflab/run.sh -u qwen3tts=/opt/upstream/qwen3-tts -- \\
      python3 /project/tools/golden/qwen3_tts_pipeline.py --checkpoint /tmp/e2e/tts --out /project/test/fixtures/golden

What is given to both sides, and why (docs/models/qwen3-tts.md "End-to-end golden"):
  - greedy decoding for the talker and the code predictor (do_sample=False, subtalker_dosample=False; Kiln: the
    pipeline's `generation` overrides): the service samples with its own counter-based generator, not torch's, so
    sampled codes cannot agree; greedy runs every logits processor that does not draw (repetition penalty,
    suppression, min_new_tokens) on both sides;
  - max_new_tokens 12 on both (the random demo talker rarely emits codec EOS; Kiln's text-length cap is larger);
  - the reference clip: 3 s of a deterministic 16-bit signal (clip_samples below, integer arithmetic that
    test/models/qwen3_tts_e2e.test.ts repeats), given to upstream as (samples / 32768, 24000) and to Kiln as a 24 kHz
    16-bit wav (ffmpeg decodes s16 to exactly samples / 32768); at 24 kHz neither side resamples.
  - the greedy picks must be far from ties: the float64 run's margin per pick (best minus runner-up of the processed
    scores) must exceed twice the float32 rule's allowance on a score, or the case is refused (CASES below).
Stored per case (every tensor F32): output.codes (frames, 16) generate()'s talker codes (captured around
model.generate), output.audio the returned waveform (ICL: after upstream's cut of the reference part),
output.margins (frames, 16) the float64 run's margin of each pick; __metadata__ {config: the call's arguments, the
clip's recipe and sha256 of its wav, the checkpoint's sha256 per file; f32_error: the float32 run against the same
pipeline in float64 (which must pick the same codes), for audio and for "scores" (every pick's processed scores,
finite ones)}.
"""
import argparse
import hashlib
import json
import os
import struct
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "shims"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qwen3_tts_compat  # noqa: E402
from common import f16_errors, f32, seed_everything  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
import transformers  # noqa: E402

MODEL = "qwen3_tts"
UPSTREAM = (f"QwenLM/Qwen3-TTS@022e286b98fbec7e1e916cb940cdf532cd9f488e Qwen3TTSModel.generate_voice_clone "
            f"(transformers {transformers.__version__}, torch {torch.__version__})")
TOLERANCE = {"f32": {"atol": 1e-4, "rtol": 1e-4}}
F32_RULE_MAX = 4  # test/models/golden.ts F32_RULE.max
MAX_NEW_TOKENS = 12
CLIP = {"recipe": "kiln-e2e-clip-v1", "seconds": 3, "rate": 24000, "seed": 1234567}

# Texts: the greedy picks' margins must stay clear of float32 rounding (main() refuses a case otherwise); with 177
# picks from a random model some land close, so these were chosen among a few candidates for their smallest margin
# (5.5e-3 and 3.6e-3 against a bound of ~1e-3; "Hello there, kiln." / "A short line to speak." had 1.0e-3 / 2.8e-4).
CASES = [
    dict(case="xvector", seed=31, text="The kiln is warm today.", language="English", x_vector_only_mode=True, ref_text=None),
    dict(case="icl", seed=32, text="Speak this short line.", language="Auto", x_vector_only_mode=False,
         ref_text="the reference words"),
]


def clip_samples(seconds: int, rate: int, seed: int) -> np.ndarray:
    """int16 samples of the reference clip, in integer arithmetic only (xorshift32 noise, triangle waves under a
    syllable-like envelope), so that the TypeScript side makes the same ones. Keep in step with clipSamples in
    test/models/qwen3_tts_e2e.test.ts."""
    n = seconds * rate
    out = np.zeros(n, dtype=np.int16)
    x = seed & 0xFFFFFFFF

    def tri(i, period, amp):  # a triangle wave in [-amp, amp], integer
        p = i % period
        h = period // 2
        return (amp * (4 * (p if p < h else period - p) - period)) // period

    for i in range(n):
        x ^= (x << 13) & 0xFFFFFFFF
        x ^= x >> 17
        x ^= (x << 5) & 0xFFFFFFFF
        env = tri(i, 4801, 1000) + 1000  # 0..2000, ~5 "syllables" a second
        voiced = tri(i, 109, 3000) + tri(i, 218, 1500) + tri(i, 53, 600)
        noise = (x >> 22) - 512  # -512..511
        v = (voiced * env) // 2000 + noise
        out[i] = max(-32768, min(32767, v))
    return out


def wav_bytes(samples: np.ndarray, rate: int) -> bytes:
    """A canonical 16-bit mono PCM wav (44-byte header), as the test writes it."""
    data = samples.astype("<i2").tobytes()
    return (b"RIFF" + struct.pack("<I", 36 + len(data)) + b"WAVEfmt " + struct.pack("<IHHIIHH", 16, 1, 1, rate, rate * 2, 2, 16)
            + b"data" + struct.pack("<I", len(data)) + data)


def run_case(model, c: dict, clip: np.ndarray) -> dict:
    """One generate_voice_clone call; returns its codes, waveform and, per greedy pick in order (talker c0 of a
    frame, then the code predictor's c1..c15 of that frame, ...), the processed scores it was taken from (the
    argmax of HF's greedy search: after repetition penalty and suppression)."""
    seed_everything(c["seed"])  # nothing is drawn (greedy); fixed anyway
    seen = {"scores": []}
    generate = model.model.generate
    argmax = torch.argmax

    def keep_scores(x, *a, **k):
        if x.is_floating_point() and x.dim() == 2:  # HF greedy: argmax(next_token_scores, dim=-1), batch 1
            assert x.shape[0] == 1, x.shape
            seen["scores"].append(x[0].detach().double().clone())
        return argmax(x, *a, **k)

    def keep_codes(*a, **k):
        torch.argmax = keep_scores
        try:
            res = generate(*a, **k)
        finally:
            torch.argmax = argmax
        seen["codes"] = res[0][0]
        return res

    model.model.generate = keep_codes
    try:
        wavs, sr = model.generate_voice_clone(
            c["text"], language=c["language"], ref_audio=(clip.astype(np.float32) / 32768, CLIP["rate"]),
            ref_text=c["ref_text"], x_vector_only_mode=c["x_vector_only_mode"], do_sample=False,
            subtalker_dosample=False, max_new_tokens=MAX_NEW_TOKENS)
    finally:
        model.model.generate = generate
    assert sr == 24000
    codes = seen["codes"].detach().clone()
    frames, groups = codes.shape
    picks = seen["scores"]
    # frames x groups picks make the codes; one more talker pick ends generation (codec eos, or the max_new_tokens'th
    # token whose other groups are never predicted)
    assert len(picks) in (frames * groups, frames * groups + 1), (len(picks), codes.shape)
    for i, sc in enumerate(picks[: frames * groups]):
        assert int(sc.argmax()) == int(codes[i // groups, i % groups]), f"pick {i} is not the code"
    return {"codes": codes, "audio": torch.from_numpy(np.asarray(wavs[0])).clone(), "picks": picks[: frames * groups]}


def margins(picks: list) -> torch.Tensor:
    """Per pick: best score minus the runner-up (finite scores; suppressed tokens are -inf)."""
    out = []
    for sc in picks:
        top = torch.topk(sc[torch.isfinite(sc)], 2).values
        out.append(float(top[0] - top[1]))
    return torch.tensor(out, dtype=torch.float64)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--checkpoint", required=True, help="the demo checkpoint folder (test/models/e2e-checkpoints.ts)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    hashes = {}
    for root, _, files in os.walk(a.checkpoint):
        for f in files:
            p = os.path.join(root, f)
            hashes[os.path.relpath(p, a.checkpoint)] = hashlib.sha256(open(p, "rb").read()).hexdigest()
    hashes = dict(sorted(hashes.items()))
    clip = clip_samples(CLIP["seconds"], CLIP["rate"], CLIP["seed"])
    clip_sha = hashlib.sha256(wav_bytes(clip, CLIP["rate"])).hexdigest()
    inference = qwen3_tts_compat.load_inference(qwen3_tts_compat.load_upstream())
    runs = {}
    for dtype in (torch.float64, torch.float32):
        model = inference.Qwen3TTSModel.from_pretrained(a.checkpoint, dtype=dtype, attn_implementation="eager")
        for c in CASES:
            runs[(c["case"], dtype)] = run_case(model, c, clip)
    for c in CASES:
        run32, run64 = runs[(c["case"], torch.float32)], runs[(c["case"], torch.float64)]
        frames, groups = run32["codes"].shape
        if run64["codes"].shape != run32["codes"].shape:
            raise SystemExit(f"{c['case']}: float32 and float64 generate {frames} and {len(run64['codes'])} frames")
        # every processed score row of the picks, flattened: the float32 run's error on them against float64 (the
        # same picks: f16_errors refuses the case where the codes differ)
        outputs = {"codes": run32["codes"], "audio": run32["audio"], "scores": torch.cat(run32["picks"])}
        ref64 = {"codes": run64["codes"], "audio": run64["audio"], "scores": torch.cat(run64["picks"])}
        errs = f16_errors(ref64, {k: v.double() if v.is_floating_point() else v for k, v in outputs.items()}, c["case"])
        # the float64 run's margins, which Kiln's float32 picks must not be able to flip: the float32 rule's
        # allowance on a score (stated tolerance at the largest score, or 4x upstream's own f32 error), twice (the
        # best and the runner-up may move apart); test/models/qwen3_tts_e2e.test.ts asserts the same
        margin = margins(run64["picks"]).reshape(frames, groups)
        e = errs["scores"]
        bound = 2 * max(TOLERANCE["f32"]["atol"] + TOLERANCE["f32"]["rtol"] * e["peak"], F32_RULE_MAX * e["max"])
        if float(margin.min()) <= bound:
            raise SystemExit(f"{c['case']}: a greedy pick's margin {float(margin.min()):.3g} is within {bound:.3g}: "
                             f"float32 rounding could flip it; choose another text")
        config = {k: v for k, v in c.items() if k != "case"} | {"max_new_tokens": MAX_NEW_TOKENS, "clip": CLIP,
                                                                  "clip_wav_sha256": clip_sha, "checkpoint_sha256": hashes}
        meta = {"config": json.dumps(config, sort_keys=True), "upstream": UPSTREAM, "seed": str(c["seed"]),
                "tolerance": json.dumps(TOLERANCE, sort_keys=True), "f32_error": json.dumps(errs, sort_keys=True)}
        path = os.path.join(a.out, MODEL, "pipeline", f"{c['case']}.safetensors")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        save_file({"output.codes": f32(run32["codes"]), "output.audio": f32(run32["audio"]), "output.margins": f32(margin)},
                  path, metadata=meta)
        au = run32["audio"]
        print(f"wrote {path} ({os.path.getsize(path) / 1024:.1f} KiB): codes {tuple(run32['codes'].shape)}, audio "
              f"{tuple(au.shape)} range [{float(au.min()):.3f}, {float(au.max()):.3f}]; smallest margin "
              f"{float(margin.min()):.3g} (bound {bound:.3g}); f32 vs f64 {errs}")


if __name__ == "__main__":
    main()
