"""End-to-end golden of the MiniMax H3 text-to-video-with-sound pipeline (issue 19 item 5): upstream's modular
pipeline (diffusers modular_pipelines/minimax_h3, MiniMaxH3Blocks, the t2va workflow) on Kiln's demo checkpoint (a
tiny random MiniMax H3 in the published diffusers layout: transformer/, text_encoder/, tokenizer/, vae/, audio_vae/,
scheduler/, audio_scheduler/), with the initial video and audio noise given to both sides.

Upstream (read, never copied into this repository): huggingface/diffusers src/diffusers/modular_pipelines/minimax_h3/
(MiniMaxH3Blocks, MiniMaxH3ModularPipeline), models/transformers/transformer_minimax_h3.py, models/autoencoders/
autoencoder_kl_minimax_h3*.py, schedulers/scheduling_minimax_h3.py, as the other MiniMax H3 generators read them;
transformers' Qwen3VLForConditionalGeneration / Qwen3VLProcessor / Qwen2TokenizerFast (the lab's).
Recipe (as root; the checkpoint comes from Kiln's own demo writer, the generator never makes weights):

  cd /work/main && npx tsc -p tsconfig.test.json --outDir build/golden
  node build/golden/test/models/e2e-checkpoints.js minimax_h3 /opt/reflab/tmp/e2e/h3
  bash /work/shared/tools/reflab/run.sh -u diffusers=/opt/upstream/diffusers/src \\
      -u proc=/work/shared/upstream/minimax-h3/processor -- \\
      python3 /project/tools/golden/minimax_h3_pipeline.py --checkpoint /tmp/e2e/h3 --out /project/test/fixtures/golden

What is given to both sides, and why (docs/models/minimax-h3.md "End-to-end golden"):
  - the initial noise: the video latents (1, 24, F, h, w) as `latents=` and the audio latents (2, 32, Na) as
    `audio_latents=`, drawn here with torch from the case's seed in upstream's own layouts; Kiln's h3Noise is another
    generator, so it takes the same values through the pipeline's `noise` option;
  - the processor: the demo checkpoint has no processor/ folder (Kiln reads none: the t2va presentation is the prompt's
    token ids without special tokens), and the t2va text step takes a Qwen3VLProcessor component, so the stock
    MiniMax H3 processor files (shared/upstream/minimax-h3/processor) are given with the demo's tokenizer files;
  - the audio VAE is built with from_config and the demo's tensors loaded into it (load_audio_vae: the demo stores no
    resampling filters and dec_in_proj as a weight-norm pair, which from_pretrained does not survive).
Nothing else is injected: the prompt presentation, the text encoder's hidden_states[50], the layout and rotary grid,
the two schedulers read from the checkpoint, the denoise loop, latent denormalisation, both VAE decodes, pixel
de-normalisation and clamping are the pipeline's. Stored per case (every tensor F32):
  input.latents          (1, 24, F, h, w) video noise given as `latents=`
  input.audio_latents    (2, 32, Na) audio noise given as `audio_latents=`
  output.latents         (1, 24, F, h, w) the denoised video latents (normalised; MiniMaxH3AfterDenoiseStep's output)
  output.audio_latents   (2, 32, Na) the denoised audio latents
  output.videos          (1, F_px, 3, H, W) output_type="pt" frames in [0, 1]
  output.audio           (1, 2, samples) the stereo waveform at 32 kHz
and __metadata__ {config: the call's arguments and the checkpoint's sha256 per file, f32_error: upstream's own
float32 pipeline against the same pipeline in float64 (with upstream's `.float()` casts kept in float64:
float64_throughout, as tools/golden/qwen_image21_pipeline.py)}.
"""
import argparse
import contextlib
import hashlib
import json
import os
import shutil
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import f16_errors, f32, seed_everything  # noqa: E402

import diffusers  # noqa: E402
from diffusers import AutoencoderKLMiniMaxH3, AutoencoderKLMiniMaxH3Audio, MiniMaxH3Transformer3DModel  # noqa: E402
from diffusers.modular_pipelines.minimax_h3 import MiniMaxH3Blocks  # noqa: E402
from diffusers.schedulers.scheduling_minimax_h3 import MiniMaxH3Scheduler  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
from transformers import Qwen2TokenizerFast, Qwen3VLForConditionalGeneration, Qwen3VLProcessor  # noqa: E402
import transformers  # noqa: E402

MODEL = "minimax_h3"
UPSTREAM = (f"huggingface/diffusers modular_pipelines/minimax_h3 MiniMaxH3Blocks t2va (diffusers {diffusers.__version__}, "
            f"transformers {transformers.__version__}, torch {torch.__version__})")
TOLERANCE = {"f32": {"atol": 1e-4, "rtol": 1e-4}}

CASES = [
    # the shortest clip upstream generates (5 s: 124 frames, 32 latent frames, 200 audio latents per channel) on the
    # smallest 2:1 canvas (64 x 32: 2 x 4 latents, 1 x 2 patches a frame), 4 grid points of the base schedule
    dict(case="t2va", seed=303, prompt="waves roll onto a black sand beach at dawn, gulls calling", height=32, width=64,
         num_frames=124, num_inference_steps=4),
]


def load_pipeline(ckpt: str, proc_extra: str, dtype: torch.dtype):
    tokenizer = Qwen2TokenizerFast.from_pretrained(os.path.join(ckpt, "tokenizer"))
    with tempfile.TemporaryDirectory() as d:
        for f in os.listdir(os.path.join(ckpt, "tokenizer")):
            shutil.copy(os.path.join(ckpt, "tokenizer", f), d)
        for f in ("chat_template.json", "preprocessor_config.json", "video_preprocessor_config.json"):
            shutil.copy(os.path.join(proc_extra, f), d)
        processor = Qwen3VLProcessor.from_pretrained(d)
    models = dict(
        transformer=MiniMaxH3Transformer3DModel.from_pretrained(ckpt, subfolder="transformer", torch_dtype=dtype),
        text_encoder=Qwen3VLForConditionalGeneration.from_pretrained(os.path.join(ckpt, "text_encoder"), dtype=dtype),
        vae=AutoencoderKLMiniMaxH3.from_pretrained(ckpt, subfolder="vae", torch_dtype=dtype),
        audio_vae=load_audio_vae(os.path.join(ckpt, "audio_vae"), dtype),
    )
    for m in models.values():
        # from_pretrained keeps _keep_in_fp32_modules (the transformer's float32 islands, the audio VAE's decoder) in
        # float32 whatever the dtype; the float64 reference casts everything (in place: weight_norm modules)
        m.to(dtype)
    pipe = MiniMaxH3Blocks().init_pipeline()
    pipe.update_components(
        tokenizer=tokenizer,
        processor=processor,
        **models,
        scheduler=MiniMaxH3Scheduler.from_pretrained(ckpt, subfolder="scheduler"),
        audio_scheduler=MiniMaxH3Scheduler.from_pretrained(ckpt, subfolder="audio_scheduler"),
    )
    return pipe


def load_audio_vae(folder: str, dtype: torch.dtype):
    """The audio VAE from the demo's folder. Not from_pretrained, which builds on the meta device and leaves every
    persistent buffer the file lacks uninitialised: the demo stores no resampling `filter` buffers (Kiln computes its
    own taps and reads stored ones only when present), so upstream's Kaiser-sinc filters came out as garbage and the
    waveform NaN. from_config builds the module for real, computing the filters in __init__ as upstream does, and the
    demo's tensors are loaded into it. The demo stores `dec_in_proj` as a weight-norm pair in the parametrizations
    spelling (Kiln's loader reads either), where diffusers' class has a plain conv: it is folded as torch's weight_norm
    computes it, torch._weight_norm(v, g, 0), in the run's dtype. Only the encoder side may be missing from the file
    (left at from_config's init: the pipeline never runs it), and the filters (computed)."""
    from safetensors.torch import load_file

    vae = AutoencoderKLMiniMaxH3Audio.from_config(AutoencoderKLMiniMaxH3Audio.load_config(folder))
    sd = {k: v.to(dtype) for k, v in load_file(os.path.join(folder, "diffusion_pytorch_model.safetensors")).items()}
    pair = "dec_in_proj.parametrizations.weight.original"
    if pair + "0" in sd:
        sd["dec_in_proj.weight"] = torch._weight_norm(sd.pop(pair + "1"), sd.pop(pair + "0"), 0)
    vae = vae.to(dtype)
    missing, unexpected = vae.load_state_dict(sd, strict=False)
    assert not unexpected, unexpected
    unused = ("encoder.", "pre_block.", "mean_proj.", "logs_proj.")
    assert all(k.startswith(unused) or k.endswith(".filter") for k in missing), [k for k in missing if not k.startswith(unused)]
    return vae.eval()


@contextlib.contextmanager
def float64_throughout():
    """For the float64 reference run: upstream's explicit `.float()` casts (the decoders' `video.float()` and
    `audio.float()`, the transformer's float32 islands, the text encoder's RoPE) give float64 tensors, so the run
    measures float32 rounding of the whole pipeline rather than rounding its float64 result back to float32 (every
    model is float64 in that run, so nothing meets a float32 weight)."""
    orig = torch.Tensor.float

    def keep64(self, *a, **k):
        return self.to(torch.float64)

    torch.Tensor.float = keep64
    try:
        yield
    finally:
        torch.Tensor.float = orig


def run_case(pipe, c: dict, dtype: torch.dtype) -> tuple[dict, dict]:
    gen = seed_everything(c["seed"])
    F = (c["num_frames"] - 5) // 17 * 5 + 2
    h, w = c["height"] // 16, c["width"] // 16
    Na = int(round(c["num_frames"] / 24 * 40))
    latents = torch.randn((1, 24, F, h, w), generator=gen, dtype=torch.float32)
    audio_latents = torch.randn((2, 32, Na), generator=gen, dtype=torch.float32)
    with torch.no_grad():
        state = pipe(prompt=c["prompt"], height=c["height"], width=c["width"], num_frames=c["num_frames"],
                     num_inference_steps=c["num_inference_steps"], latents=latents.to(dtype),
                     audio_latents=audio_latents.to(dtype), output_type="pt")
    out = {
        "latents": state.get("latents"),
        "audio_latents": state.get("audio_latents"),
        "videos": state.get("videos"),
        "audio": state.get("audio"),
    }
    return {"latents": latents, "audio_latents": audio_latents}, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--checkpoint", required=True, help="the demo checkpoint folder (test/models/e2e-checkpoints.ts)")
    ap.add_argument("--processor-extra", default="/upstream/proc", help="stock MiniMax H3 processor files")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    hashes = {}
    for root, _, files in os.walk(a.checkpoint):
        for f in files:
            p = os.path.join(root, f)
            hashes[os.path.relpath(p, a.checkpoint)] = hashlib.sha256(open(p, "rb").read()).hexdigest()
    hashes = dict(sorted(hashes.items()))
    runs = {}
    for dtype in (torch.float64, torch.float32):
        pipe = load_pipeline(a.checkpoint, a.processor_extra, dtype)
        with float64_throughout() if dtype == torch.float64 else contextlib.nullcontext():
            for c in CASES:
                runs[(c["case"], dtype)] = run_case(pipe, c, dtype)
    for c in CASES:
        inputs, outputs = runs[(c["case"], torch.float32)]
        _, ref64 = runs[(c["case"], torch.float64)]
        for k, v in outputs.items():
            print(f"  {k}: {None if v is None else (tuple(v.shape), v.dtype)}")
        errs = f16_errors({k: v.double() for k, v in ref64.items()}, {k: v.double() for k, v in outputs.items()}, c["case"])
        config = {k: v for k, v in c.items() if k not in ("case",)}
        config["checkpoint_sha256"] = hashes
        meta = {"config": json.dumps(config, sort_keys=True), "upstream": UPSTREAM, "seed": str(c["seed"]),
                "tolerance": json.dumps(TOLERANCE, sort_keys=True), "f32_error": json.dumps(errs, sort_keys=True)}
        tensors = {f"input.{k}": f32(v) for k, v in inputs.items()} | {f"output.{k}": f32(v) for k, v in outputs.items()}
        path = os.path.join(a.out, MODEL, "pipeline", f"{c['case']}.safetensors")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        save_file(tensors, path, metadata=meta)
        v = outputs["videos"]
        print(f"wrote {path} ({os.path.getsize(path) / 1024:.1f} KiB): videos {tuple(v.shape)} range "
              f"[{float(v.min()):.3f}, {float(v.max()):.3f}], saturated {float(((v <= 0) | (v >= 1)).float().mean()):.3f}; "
              f"audio {tuple(outputs['audio'].shape)} peak {float(outputs['audio'].abs().max()):.3f}; f32 vs f64 {errs}")


if __name__ == "__main__":
    main()
