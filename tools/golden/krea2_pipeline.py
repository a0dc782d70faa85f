"""End-to-end golden for Krea 2 Turbo (issue 17): krea-ai/krea-2's sampling.sample() loop with Turbo's settings (CFG
off, mu 1.15) on the service's demo checkpoint, loaded with upstream's own classes: the prompt through
encoder.Qwen3VLConditioner (its __init__ unchanged, from_pretrained on the demo's text_encoder/ folder: the demo
tokenizer's files and a 36-layer Qwen3-VL), mmdit.SingleStreamDiT (load_state_dict strict on the demo's native file),
autoencoder.QwenAutoencoder's decode on diffusers' AutoencoderKLQwenImage (the demo's vae/ folder).

Upstream (read, never copied): krea-ai/krea-2 @ db3984fbc6e13b34c0064990fc2d95ac64d00058 (encoder.py, mmdit.py,
sampling.py, autoencoder.py), huggingface/diffusers autoencoder_kl_qwenimage.py (the stored snapshot), transformers
(the lab's). Recipe, from the checkout, as root:

  npx tsc -p tsconfig.test.json --outDir build/k2golden && node build/k2golden/test/models/krea2-checkpoint.js /tmp/k2demo
  mkdir -p /tmp/krea2-up && git -C <mirror of krea-ai/krea-2> archive HEAD mmdit.py sampling.py encoder.py autoencoder.py | tar -x -C /tmp/krea2-up
  flock /tmp/kiln-reflab.lock bash /work/shared/tools/reflab/run.sh -u krea2=/tmp/krea2-up -u diffusers=/opt/upstream/diffusers/src \
      -u ckpt=/tmp/k2demo -- python3 /project/tools/golden/krea2_pipeline.py --out /project/test/fixtures/golden

sample()'s steps are re-stated below around upstream's own functions (prepare, timesteps, the model, the Euler update,
the unpatchify, QwenAutoencoder.decode), for three reasons, none of which changes what is computed in float32:
  - the noise is drawn once (torch.randn(1, 16, h, w) from Generator.manual_seed(seed), as sample() draws it) and
    stored, so the float64 reference run and Kiln use the same draw;
  - sample() casts the final latent to bfloat16 before decoding (its checkpoint runs in bfloat16); here the float32
    latent is decoded, and the bf16 path's picture is stored as well (output.image_bf16_path, for reference only);
  - the conditioner's language model gets the text positions transformers 4.57 (which krea-2 pins) derives from the
    attention mask; the lab's 5.x would number the suffix after the pads (same shim as tools/golden/krea2_text.py).
A float64 run of the same steps (every module in float64, `.float()` upcasts lifted) gives f32_error per output.
Writes krea2/pipeline/<case>.safetensors (no weights: the checkpoint is the demo's, pinned by sha256 in
__metadata__.checkpoint_sha256):
  input.prompt_codepoints, input.seed, input.steps, input.mu, input.width, input.height, input.noise (1, 16, h, w)
  output.sigmas, output.context (1, L, features) (txtmlp of the real rows), output.v.<i>, output.latents (1, 16, h, w)
  output.decoded (1, 3, H, W) the VAE's clamped output of the float32 latent; output.image (H, W, 3) its 8-bit
  picture ((x + 1) / 2 * 255 truncated, as sample()); output.image_bf16_path (H, W, 3) sample()'s own picture
"""
import argparse
import contextlib
import hashlib
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import write_case, seed_everything  # noqa: E402

torch.compile = lambda fn=None, **_k: fn if fn is not None else (lambda f: f)

import autoencoder  # noqa: E402
import encoder  # noqa: E402
import mmdit  # noqa: E402
import sampling  # noqa: E402
from diffusers import AutoencoderKLQwenImage  # noqa: E402
from einops import rearrange  # noqa: E402
from safetensors.torch import load_file  # noqa: E402

mmdit.sdpa_kernel = lambda *a, **k: contextlib.nullcontext()

CKPT = "/upstream/ckpt"
UPSTREAM = ("krea-ai/krea-2@db3984fbc6e13b34c0064990fc2d95ac64d00058 sampling.sample (Turbo: cfg 0, mu 1.15), "
            "encoder.Qwen3VLConditioner, mmdit.SingleStreamDiT, autoencoder.QwenAutoencoder.decode")
DEMO_DIT = dict(features=64, tdim=256, txtdim=32, heads=2, kvheads=1, multiplier=4, layers=2, patch=2, channels=16,
                theta=1e3, txtlayers=12, txtheads=1, txtkvheads=1)


@contextlib.contextmanager
def float64_throughout(on):
    if not on:
        yield
        return
    orig = torch.Tensor.float
    # float64 stays float64; integers (positions) become float64 too, so they meet float64 tables
    torch.Tensor.float = lambda self, *a, **k: self if self.dtype == torch.float64 else (
        self.double() if not self.is_floating_point() else orig(self, *a, **k))
    try:
        yield
    finally:
        torch.Tensor.float = orig


class Positions(torch.nn.Module):
    """transformers 4.57's text-only positions from the attention mask (pads take none)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    @property
    def device(self):
        return torch.device("cpu")

    def forward(self, input_ids, attention_mask, output_hidden_states):
        pos = attention_mask.long().cumsum(-1) - 1
        pos = pos.masked_fill(attention_mask == 0, 0)[None].expand(3, -1, -1)
        return self.model(input_ids=input_ids, attention_mask=attention_mask, position_ids=pos,
                          output_hidden_states=output_hidden_states)


def load(dtype):
    enc = encoder.Qwen3VLConditioner(os.path.join(CKPT, "text_encoder"))
    enc.qwen = Positions(enc.qwen.to(dtype))
    dit = mmdit.SingleStreamDiT(mmdit.SingleMMDiTConfig(**DEMO_DIT))
    dit.load_state_dict({k: v.float() for k, v in load_file(os.path.join(CKPT, "transformer", "krea-2-turbo-demo.safetensors")).items()}, strict=True)
    dit = dit.to(dtype).eval()
    cfg = json.load(open(os.path.join(CKPT, "vae", "config.json")))
    ae = AutoencoderKLQwenImage(**{k: v for k, v in cfg.items() if not k.startswith("_")})
    missing, unexpected = ae.load_state_dict({k: v.float() for k, v in load_file(os.path.join(CKPT, "vae", "diffusion_pytorch_model.safetensors")).items()}, strict=False)
    assert not unexpected and all(k.startswith(("encoder.", "quant_conv.")) for k in missing), (missing, unexpected)
    qa = autoencoder.QwenAutoencoder.__new__(autoencoder.QwenAutoencoder)
    torch.nn.Module.__init__(qa)
    qa.ae, qa.compression, qa.channels = ae.eval(), 8, 16
    qa.register_buffer("latents_mean", torch.tensor(ae.latents_mean).view(1, -1, 1, 1, 1))
    qa.register_buffer("latents_std", torch.tensor(ae.latents_std).view(1, -1, 1, 1, 1))
    return enc, dit, qa.to(dtype)


def run(prompt, noise, width, height, steps, mu, dtype):
    """sample()'s steps for one prompt, guidance 0 (no negative branch)."""
    enc, model, ae = load(dtype)
    patch = model.config.patch
    got = {}
    h = model.txtmlp.register_forward_hook(lambda _m, _a, o: got.__setitem__("context", o))
    with torch.no_grad(), float64_throughout(dtype == torch.float64):
        txt, txtmask = enc([prompt])
        x, pos, mask = sampling.prepare(noise.to(dtype), txt.shape[1], patch, txtmask)
        x1 = (256 // (ae.compression * patch)) ** 2
        x2 = (1280 // (ae.compression * patch)) ** 2
        ts = sampling.timesteps(x.shape[1], steps, x1, x2, mu=mu)
        img = x
        out = {"sigmas": torch.tensor(ts, dtype=torch.float64)}
        for i, (tcurr, tprev) in enumerate(zip(ts[:-1], ts[1:])):
            t = torch.full((1,), tcurr, dtype=img.dtype)
            v = model(img=img, context=txt.to(dtype), t=t, pos=pos, mask=mask)
            out[f"v.{i}"] = v
            img = img + (tprev - tcurr) * v
        lat = rearrange(img, "b (h w) (c ph pw) -> b c (h ph) (w pw)", ph=patch, pw=patch,
                        h=height // (ae.compression * patch), w=width // (ae.compression * patch))
        decoded = ae.decode(lat)
        bf16 = ae.decode(lat.to(torch.bfloat16)).float()
    h.remove()
    real = txtmask[0].bool()
    out["context"] = got["context"][:, real]
    out["latents"] = lat
    out["decoded"] = decoded
    pic = lambda d: rearrange((d.clamp(-1, 1) * 0.5 + 0.5) * 255.0, "b c h w -> b h w c")[0].float().byte().float()
    out["image"] = pic(decoded)
    out["image_bf16_path"] = pic(bf16)
    return out


def hashes():
    out = {}
    for root, _dirs, files in os.walk(CKPT):
        for f in files:
            p = os.path.join(root, f)
            out[os.path.relpath(p, CKPT)] = hashlib.sha256(open(p, "rb").read()).hexdigest()
    return dict(sorted(out.items()))


def case(out_dir, name, prompt, seed, width, height, steps=2, mu=1.15):
    seed_everything(seed)
    noise = torch.randn(1, 16, height // 8, width // 8, device="cpu", dtype=torch.float32,
                        generator=torch.Generator(device="cpu").manual_seed(seed))
    ref = run(prompt, noise, width, height, steps, mu, torch.float64)
    mine = run(prompt, noise, width, height, steps, mu, torch.float32)
    errs = common.f16_errors({k: v for k, v in ref.items() if k not in ("image", "image_bf16_path", "sigmas")},
                             {k: v.double() for k, v in mine.items()}, name)
    d = (mine["image"] - mine["image_bf16_path"]).abs()
    print(f"{name}: f32 vs f64 {json.dumps({k: round(v['max'], 8) for k, v in errs.items()})}; "
          f"bf16-decode path differs in {int((d > 0).sum())} of {d.numel()} bytes (max {int(d.max())})")
    inputs = {"prompt_codepoints": torch.tensor([ord(c) for c in prompt], dtype=torch.float32), "seed": torch.tensor([seed]),
              "steps": torch.tensor([steps]), "mu": torch.tensor([mu]), "width": torch.tensor([width]),
              "height": torch.tensor([height]), "noise": noise}
    write_case(out_dir, "krea2", "pipeline", name, weights={}, inputs=inputs, outputs=mine, config=DEMO_DIT,
               upstream=UPSTREAM, seed=seed,
               metadata={"checkpoint_sha256": json.dumps(hashes(), sort_keys=True), "f32_error": json.dumps(errs, sort_keys=True)})


def main(out):
    case(out, "t2i_2_steps_64x48", "a lighthouse at dusk, oil painting", 7, 64, 48)
    case(out, "t2i_3_steps_48x64_unicode", "朝の湖 — a misty lake, watercolor", 11, 48, 64, steps=3)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True, help="fixture root (test/fixtures/golden)")
    main(ap.parse_args().out)
