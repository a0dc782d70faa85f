"""End-to-end golden of the Qwen-Image-2.1 pipeline (issue 19 item 5): upstream's QwenImage21Pipeline.__call__ on
Kiln's demo checkpoint (a tiny random model in the published diffusers folder format), text-to-image and one edit.

Upstream (read, never copied into this repository):
  huggingface/diffusers src/diffusers/pipelines/qwenimage21/pipeline_qwenimage21.py @ 0a1f36769ccd (diffusers#14804,
      merged), models/transformers/transformer_qwenimage21.py @ 0da0baaf, models/autoencoders/
      autoencoder_kl_qwenimage21.py @ 21b3a41d (transcribed outside the repo into a copy of the diffusers tree, as the
      other Qwen-Image-2.1 generators); transformers' Qwen3VLForConditionalGeneration / Qwen3VLProcessor (the lab's).
Recipe (as root; the checkpoint comes from Kiln's own demo writer, the generator never makes weights):

  cd /work/main && npx tsc -p tsconfig.test.json --outDir build/golden
  node build/golden/test/models/e2e-checkpoints.js qwen_image21 /opt/reflab/tmp/e2e/qi21
  bash /work/shared/tools/reflab/run.sh -u diffusers=/opt/upstream/diffusers-qi21/src \\
      -u proc=/work/shared/upstream/minimax-h3/processor -- \\
      python3 /project/tools/golden/qwen_image21_pipeline.py --checkpoint /tmp/e2e/qi21 --out /project/test/fixtures/golden

What is given to both sides, and why (docs/models/qwen-image-2.1.md "End-to-end golden"):
  - the initial latents (`latents=`, packed (1, h*w, C)): drawn here with randn_tensor from the case's seed in
    upstream's own layout ((1, 1, C, h, w) then _pack_latents); Kiln's seededNoise is another generator;
  - the reference image as PNG bytes, at exactly the size the pipeline brings it to (256 x 256 with
    output_resolution 256): upstream resizes with PIL's Lanczos and Kiln with sharp (cover); at the target size both
    are the identity, so the pixels reach the VAE and the vision tower unchanged on both sides;
  - processor files the demo checkpoint does not write: the stock Qwen3-VL chat_template.json and
    video_preprocessor_config.json (Qwen3VLProcessor refuses to load without a video processor; the template is what
    the pipeline's __init__ counts the dropped system turn with). Kiln reads neither.
Nothing else is injected: prompts, the negative prompt, true CFG, the scheduler (read from the checkpoint), mu, the
prefix KV cache, the VAE decode and postprocess are the pipeline's. Stored per case (every tensor F32):
  input.latents          the initial latents given as `latents=`
  input.reference_png    (edit) the PNG file's bytes, one value per byte
  output.latents         the final latents (callback_on_step_end at the last step)
  output.image           (1, 4, H, W) output_type="pt" (RGBA in [0, 1], the demo VAE's 4 channels)
and __metadata__ {config: the call's arguments and the checkpoint's sha256 per file, f32_error: upstream's own
float32 pipeline against the same pipeline in float64, float64_throughout below}.
"""
import argparse
import contextlib
import hashlib
import io
import json
import os
import shutil
import sys
import tempfile

import numpy as np
import torch
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import f16_errors, f32, seed_everything  # noqa: E402

import diffusers  # noqa: E402
from diffusers.models.autoencoders.autoencoder_kl_qwenimage21 import AutoencoderKLQwenImage21  # noqa: E402
from diffusers.models.transformers.transformer_qwenimage21 import QwenImage21Transformer2DModel  # noqa: E402
from diffusers.pipelines.qwenimage21.pipeline_qwenimage21 import QwenImage21Pipeline  # noqa: E402
from diffusers.schedulers import FlowMatchEulerDiscreteScheduler  # noqa: E402
from diffusers.utils.torch_utils import randn_tensor  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
from transformers import Qwen3VLForConditionalGeneration, Qwen3VLProcessor  # noqa: E402
import transformers  # noqa: E402

MODEL = "qwen_image21"
UPSTREAM = (f"huggingface/diffusers pipeline_qwenimage21.py @ 0a1f36769ccdd9a3db6adf27d5e54cc6ebd2dee0 "
            f"(QwenImage21Pipeline.__call__; diffusers {diffusers.__version__}, transformers {transformers.__version__}, "
            f"torch {torch.__version__})")
TOLERANCE = {"f32": {"atol": 1e-4, "rtol": 1e-4}}

CASES = [
    # text-to-image, true CFG with a negative prompt, a non-square target (w 96, h 64)
    dict(case="t2i", seed=101, prompt="a red kiln at dusk, wide shot", negative_prompt="blurry", true_cfg_scale=4.0,
         num_inference_steps=3, width=96, height=64),
    # one reference (256 x 256 at output_resolution 256), true CFG with an empty negative prompt (the pipeline's " ")
    dict(case="edit", seed=202, prompt="make <image1> blue", negative_prompt="", true_cfg_scale=2.5,
         num_inference_steps=3, width=64, height=96, output_resolution=256, reference=(256, 256)),
]


def reference_png(w: int, h: int, seed: int) -> bytes:
    """A deterministic RGB picture: gradients plus seeded blocks (structure for the VAE and the vision tower)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    img = np.stack([x * 255 // (w - 1), y * 255 // (h - 1), (x + y) * 255 // (w + h - 2)], axis=-1).astype(np.int32)
    blocks = rng.integers(0, 256, size=(h // 32, w // 32, 3))
    img = (img + np.kron(blocks, np.ones((32, 32, 1), dtype=np.int64))) // 2
    buf = io.BytesIO()
    Image.fromarray(img.astype(np.uint8), "RGB").save(buf, format="PNG")
    return buf.getvalue()


def load_pipeline(ckpt: str, proc_extra: str, dtype: torch.dtype) -> QwenImage21Pipeline:
    with tempfile.TemporaryDirectory() as d:
        for f in os.listdir(os.path.join(ckpt, "processor")):
            shutil.copy(os.path.join(ckpt, "processor", f), d)
        for f in ("chat_template.json", "video_preprocessor_config.json"):
            shutil.copy(os.path.join(proc_extra, f), d)
        processor = Qwen3VLProcessor.from_pretrained(d)
    pipe = QwenImage21Pipeline(
        scheduler=FlowMatchEulerDiscreteScheduler.from_pretrained(ckpt, subfolder="scheduler"),
        vae=AutoencoderKLQwenImage21.from_pretrained(ckpt, subfolder="vae", torch_dtype=dtype),
        text_encoder=Qwen3VLForConditionalGeneration.from_pretrained(os.path.join(ckpt, "text_encoder"), dtype=dtype),
        processor=processor,
        transformer=QwenImage21Transformer2DModel.from_pretrained(ckpt, subfolder="transformer", torch_dtype=dtype),
    )
    pipe.set_progress_bar_config(disable=True)
    return pipe


@contextlib.contextmanager
def float64_throughout():
    """For the float64 reference run: upstream's explicit `.float()` upcasts (meant for half-precision activations:
    the transformer's RoPE, timestep projection and zero-centred RMSNorm) leave float64 tensors float64 instead of
    rounding them to float32, so the run measures float32 rounding of the whole pipeline. Measured: with the casts
    kept, the transformer's first forward in "float64" is 1.3e-3 from the float32 one; with them lifted, 2.6e-2 (the
    random demo weights drive the joint states to ~1e4, where float32's rounding is amplified)."""
    orig = torch.Tensor.float

    def keep64(self, *a, **k):
        return self if self.dtype == torch.float64 else orig(self, *a, **k)

    torch.Tensor.float = keep64
    try:
        yield
    finally:
        torch.Tensor.float = orig


def run_case(pipe: QwenImage21Pipeline, c: dict, dtype: torch.dtype) -> tuple[dict, dict]:
    gen = seed_everything(c["seed"])
    C = pipe.transformer.config.in_channels
    h, w = c["height"] // 16, c["width"] // 16
    noise = randn_tensor((1, 1, C, h, w), generator=gen, dtype=torch.float32)
    packed = QwenImage21Pipeline._pack_latents(noise, 1, C, h, w)
    inputs = {"latents": packed}
    kwargs = {}
    if "reference" in c:
        png = reference_png(*c["reference"], seed=c["seed"])
        inputs["reference_png"] = torch.tensor(list(png), dtype=torch.float32)
        kwargs = dict(image=Image.open(io.BytesIO(png)), output_resolution=c["output_resolution"])
    final = {}

    def keep(_pipe, i, _t, kw):
        final["latents"] = kw["latents"]
        return {}

    with torch.no_grad():
        image = pipe(prompt=c["prompt"], negative_prompt=c["negative_prompt"], true_cfg_scale=c["true_cfg_scale"],
                     height=c["height"], width=c["width"], num_inference_steps=c["num_inference_steps"],
                     latents=packed.to(dtype), output_type="pt", callback_on_step_end=keep, **kwargs).images
    return inputs, {"latents": final["latents"], "image": image}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--checkpoint", required=True, help="the demo checkpoint folder (test/models/e2e-checkpoints.ts)")
    ap.add_argument("--processor-extra", default="/upstream/proc", help="stock Qwen3-VL processor files")
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
        errs = f16_errors({k: v.double() for k, v in ref64.items()}, {k: v.double() for k, v in outputs.items()}, c["case"])
        config = {k: v for k, v in c.items() if k not in ("case",)}
        config["checkpoint_sha256"] = hashes
        meta = {"config": json.dumps(config, sort_keys=True), "upstream": UPSTREAM, "seed": str(c["seed"]),
                "tolerance": json.dumps(TOLERANCE, sort_keys=True), "f32_error": json.dumps(errs, sort_keys=True)}
        tensors = {f"input.{k}": f32(v) for k, v in inputs.items()} | {f"output.{k}": f32(v) for k, v in outputs.items()}
        path = os.path.join(a.out, MODEL, "pipeline", f"{c['case']}.safetensors")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        save_file(tensors, path, metadata=meta)
        img = outputs["image"]
        print(f"wrote {path} ({os.path.getsize(path) / 1024:.1f} KiB): image {tuple(img.shape)} "
              f"range [{float(img.min()):.3f}, {float(img.max()):.3f}], saturated {float(((img <= 0) | (img >= 1)).float().mean()):.3f}; "
              f"f32 vs f64 {errs}")


if __name__ == "__main__":
    main()
