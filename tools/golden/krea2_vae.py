"""Golden vectors for src/models/krea2/vae.ts: Krea 2's decode (krea-ai/krea-2 autoencoder.py QwenAutoencoder.decode)
on a tiny diffusers AutoencoderKLQwenImage (the Qwen-Image VAE).

Upstream (read, never copied into this repository):
  krea-ai/krea-2 @ db3984fbc6e13b34c0064990fc2d95ac64d00058 autoencoder.py: latents (B, 16, h, w) -> (B, 16, 1, h, w),
      x * latents_std + latents_mean, ae.decode(x).sample -> (B, 3, 8h, 8w)
  huggingface/diffusers src/diffusers/models/autoencoders/autoencoder_kl_qwenimage.py (the stored snapshot, e87b2a7a)
Run from the checkout, as root, one lab run at a time:

  cd /work/main && flock /tmp/kiln-reflab.lock bash /work/shared/tools/reflab/run.sh -u krea2=/tmp/krea2-up \
      -u diffusers=/opt/upstream/diffusers/src -- python3 /project/tools/golden/krea2_vae.py --out /project/test/fixtures/golden

QwenAutoencoder.decode runs unchanged on an instance made without its __init__ (which downloads Qwen/Qwen-Image's
VAE): its `ae` is a tiny random AutoencoderKLQwenImage with the real latents_mean / latents_std, compression 8 and
16 channels as the class sets them.
Writes krea2/vae_decode/<case>.safetensors:
  weight.post_quant_conv.*, weight.decoder.*   the checkpoint's own keys (encoder weights are not dumped)
  input.latents (B, 16, h, w)                  the sampler's unpatchified latents
  output.post_quant_conv, output.conv_in, output.mid_block, output.up_block.<i>  (B, C, 1, h', w') intermediates
  output.decoder (B, 3, 1, H, W) before the clamp; output.decoded (B, 3, H, W) what decode returns (clamped)
The tiny configs keep the real structure (z_dim 16, dim_mult [1, 2, 4, 4], temporal flags [False, True, True], so
both upsample3d and upsample2d levels occur) with base widths 2 and 3 instead of 96 (the second case with one res block per level). Weights are re-drawn so the
activations are O(1): conv weights ~ N(0, 1/fan_in) (x1.5 for decoder.conv_out, so the clamp bites on some pixels), biases
~ N(0, 0.5), RMS-norm gammas ~ U(0.5, 1.5).
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import diffusers_upstream, lowp, record_f16, seed_everything, write_case  # noqa: E402

from diffusers import AutoencoderKLQwenImage  # noqa: E402

import autoencoder  # noqa: E402  (krea-ai/krea-2 autoencoder.py)

UPSTREAM = "krea-ai/krea-2@db3984fbc6e13b34c0064990fc2d95ac64d00058 autoencoder.py QwenAutoencoder.decode; "


def randomize(ae, gen):
    with torch.no_grad():
        for name, p in ae.named_parameters():
            if name.endswith("gamma"):
                p.copy_(0.5 + torch.rand(p.shape, generator=gen))
            elif name.endswith("bias"):
                p.copy_(0.5 * torch.randn(p.shape, generator=gen))
            elif p.dim() >= 2:
                fan_in = p[0].numel()
                gain = 1.5 if name == "decoder.conv_out.weight" else 1.0
                p.copy_(gain * torch.randn(p.shape, generator=gen) / fan_in ** 0.5)


def krea_autoencoder(ae):
    k = autoencoder.QwenAutoencoder.__new__(autoencoder.QwenAutoencoder)
    torch.nn.Module.__init__(k)
    k.ae = ae
    k.compression = 8
    k.channels = 16
    k.register_buffer("latents_mean", torch.tensor(ae.latents_mean).view(1, -1, 1, 1, 1))
    k.register_buffer("latents_std", torch.tensor(ae.latents_std).view(1, -1, 1, 1, 1))
    return k


def case(out, name, seed, batch, h, w, base_dim, latent_scale=1.0, num_res_blocks=2):
    gen = seed_everything(seed)
    ae = AutoencoderKLQwenImage(base_dim=base_dim, num_res_blocks=num_res_blocks).eval()
    randomize(ae, gen)
    latents = latent_scale * torch.randn(batch, 16, h, w, generator=gen)
    k = lowp(krea_autoencoder(ae))
    got = {}
    dec = k.ae.decoder
    hooks = [k.ae.post_quant_conv.register_forward_hook(lambda _m, _a, o: got.__setitem__("post_quant_conv", o)),
             dec.conv_in.register_forward_hook(lambda _m, _a, o: got.__setitem__("conv_in", o)),
             dec.mid_block.register_forward_hook(lambda _m, _a, o: got.__setitem__("mid_block", o)),
             dec.register_forward_hook(lambda _m, _a, o: got.__setitem__("decoder", o))]
    for i, b in enumerate(dec.up_blocks):
        hooks.append(b.register_forward_hook(lambda _m, _a, o, i=i: got.__setitem__(f"up_block.{i}", o)))
    with torch.no_grad():
        decoded = k.decode(lowp(latents))
    for hk in hooks:
        hk.remove()
    config = {k2: v for k2, v in dict(ae.config).items() if not k2.startswith("_")}
    weights = {k2: v for k2, v in ae.state_dict().items() if k2.startswith(("decoder.", "post_quant_conv."))}
    outputs = dict(got, decoded=decoded)
    print(f"{name}: decoded range [{float(decoded.min()):.3f}, {float(decoded.max()):.3f}], "
          f"clamped {float((decoded.abs() >= 1).float().mean()):.3f}")
    write_case(out, "krea2", "vae_decode", name, weights=weights, inputs={"latents": latents}, outputs=outputs,
               config=config, upstream=UPSTREAM + diffusers_upstream("e87b2a7ad836 autoencoder_kl_qwenimage.py"),
               seed=seed)


def main(out):
    case(out, "b1_4x6", 1, 1, 4, 6, 2)
    case(out, "b2_3x3", 2, 2, 3, 3, 2)
    case(out, "other_config_base3_1res_2x5", 3, 1, 2, 5, 3, latent_scale=2.0, num_res_blocks=1)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True, help="fixture root (test/fixtures/golden)")
    a = ap.parse_args()
    record_f16(lambda: main(a.out))
