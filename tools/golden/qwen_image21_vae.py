"""Golden vectors for src/models/qwen_image21/vae (diffusers AutoencoderKLQwenImage21: 64 latent channels, 16x).

Upstream (read, never copied into this repository):
  huggingface/diffusers src/diffusers/models/autoencoders/autoencoder_kl_qwenimage21.py @ d6dfd676aefd
      (not in the stored diffusers snapshot: transcribed outside the repo into the diffusers-qi21 tree; the diffusers
      __init__ there does not register the class, so the module file is imported directly)
  the VAE steps of src/diffusers/pipelines/qwenimage21/pipeline_qwenimage21.py @ c245e42d101b, re-stated below:
      references: vae.encode(image [B, 4, 1, H, W] RGBA in [-1, 1]).latent_dist.mode(), then (z - mean) / std
      decode: latents * std + mean, vae.decode(...)[0][:, :, 0] (clamped to [-1, 1] inside _decode)
Run from the checkout, as root, one lab run at a time:

  cd /work/main && flock /tmp/kiln-reflab.lock bash /work/shared/tools/reflab/run.sh \
      -u diffusers=/opt/upstream/diffusers-qi21/src -- \
      python3 /project/tools/golden/qwen_image21_vae.py --out /project/test/fixtures/golden

Writes qwen_image21/vae_decode/<case>.safetensors
  weight.post_quant_conv.*, weight.decoder.*   the checkpoint's own keys (encoder weights are not dumped)
  input.latents        [B, 64, 1, h, w] normalised latents, as the sampler leaves them (unpacked)
  output.post_quant_conv, output.conv_in, output.mid_block, output.up_block.<i> (i < 3)  [B, C, 1, h', w'] intermediates
  output.decoder       [B, 4, 1, H, W] before the clamp  (these intermediates: case small only)
  output.decoded       vae.decode(latents * std + mean), clamped to [-1, 1]
and qwen_image21/vae_encode/<case>.safetensors
  weight.encoder.*, weight.quant_conv.*
  input.pixels         [B, 4, 1, H, W] RGBA in [-1, 1] (what the pipeline's image processor hands the VAE)
  output.down_block.<i>, output.mid_block, output.encoder (z_dim * 2 channels), output.quant_conv
  output.mode          latent_dist.mode() (the first z_dim channels);  output.latents  (mode - mean) / std
The tiny config keeps the real structure (z_dim 64 with the real latents_mean / std, dim_mult [1, 2, 4, 8, 8], two
res blocks, temporal flags [False, True, True, True] so the shortcuts' channel grouping and zero-frame padding are
the real ones, RGBA in and out); only the base widths shrink (2 instead of 96 / 144). Weights are re-drawn so the
activations are O(1): conv weights ~ N(0, 1/fan_in) (x3 for decoder.conv_out), biases ~ N(0, 1), RMS-norm gammas ~ U(0.5, 1.5).
The unit biases keep pixel vectors away from 0 before the norms: the tiny levels normalise 2 to 4 channels, where a
near-zero vector turns rounding into a different direction (with 0.1 biases a few pixels were off by 2e-4 in f32).
"""
import argparse
import importlib
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import lowp, record_f16, seed_everything, write_case  # noqa: E402

import diffusers  # noqa: E402

qi21 = importlib.import_module("diffusers.models.autoencoders.autoencoder_kl_qwenimage21")
AutoencoderKLQwenImage21 = qi21.AutoencoderKLQwenImage21

MODEL = "qwen_image21"
# The fixtures were first made from d6dfd676; the merged version 21b3a41d (transcribed the same way) gives the same
# tensors bit for bit at float32 and adds the float32 normalisation inside RMS_norm for f16 inputs.
COMMIT = "21b3a41d7f82acbe69fc6f00c1caf27d37c31f9a"
UPSTREAM = (f"huggingface/diffusers@{COMMIT} autoencoder_kl_qwenimage21.py + pipeline_qwenimage21.py@0a1f36769ccd "
            f"VAE steps (diffusers {diffusers.__version__}, torch {torch.__version__})")

TINY = dict(base_dim=2, decoder_base_dim=2, z_dim=64, dim_mult=[1, 2, 4, 8, 8], num_res_blocks=2, attn_scales=[],
            temperal_downsample=[False, True, True, True], dropout=0.0, is_residual=True, in_channels=4,
            out_channels=4, patch_size=None, scale_factor_temporal=8, scale_factor_spatial=16)


def randomize(model, gen, prefixes):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if not name.startswith(prefixes):
                continue
            if name.endswith("gamma"):
                p.copy_(0.5 + torch.rand(p.shape, generator=gen))
            elif p.dim() >= 2:
                # the decoder's last conv x3, so a good share of the pixels lands outside [-1, 1] and is clamped
                gain = 3.0 if name == "decoder.conv_out.weight" else 1.0
                p.copy_(gain * torch.randn(p.shape, generator=gen) / p[0].numel() ** 0.5)
            else:
                p.copy_(torch.randn(p.shape, generator=gen))


def build(seed, prefixes, **over):
    gen = seed_everything(seed)
    vae = AutoencoderKLQwenImage21(**dict(TINY, **over)).eval()
    randomize(vae, gen, prefixes)
    mean = torch.tensor(vae.config.latents_mean).view(1, -1, 1, 1, 1)
    std = torch.tensor(vae.config.latents_std).view(1, -1, 1, 1, 1)
    return vae, gen, mean, std


def hook(store, key):
    def fn(_m, _i, out):
        if key not in store:
            store[key] = out.detach().clone()
    return fn


def decode_case(name, seed, batch, h, w, intermediates=True, **over):
    prefixes = ("decoder.", "post_quant_conv.")
    vae, gen, mean, std = build(seed, prefixes, **over)
    latents = torch.randn(batch, 64, 1, h, w, generator=gen)
    weights = {k: v for k, v in vae.state_dict().items() if k.startswith(prefixes)}
    vae = lowp(vae)
    seen = {}
    mods = {"post_quant_conv": vae.post_quant_conv, "conv_in": vae.decoder.conv_in, "mid_block": vae.decoder.mid_block,
            "decoder": vae.decoder}
    if intermediates:
        for i, b in enumerate(vae.decoder.up_blocks[:3]):  # the last two are as big as the output (size limit)
            mods[f"up_block.{i}"] = b
    else:
        mods = {}
    hooks = [m.register_forward_hook(hook(seen, k)) for k, m in mods.items()]
    with torch.no_grad():
        decoded = vae.decode(lowp(latents) * lowp(std) + lowp(mean), return_dict=False)[0]  # the pipeline's order
    for hk in hooks:
        hk.remove()
    write_case(ARGS.out, MODEL, "vae_decode", name, weights=weights, inputs={"latents": latents},
               outputs={**seen, "decoded": decoded}, config=dict(vae.config), upstream=UPSTREAM, seed=seed)


def encode_case(name, seed, batch, height, width, **over):
    prefixes = ("encoder.", "quant_conv.")
    vae, gen, mean, std = build(seed, prefixes, **over)
    pixels = torch.rand(batch, 4, 1, height, width, generator=gen) * 2 - 1
    weights = {k: v for k, v in vae.state_dict().items() if k.startswith(prefixes)}
    vae = lowp(vae)
    seen = {}
    mods = {"mid_block": vae.encoder.mid_block, "encoder": vae.encoder, "quant_conv": vae.quant_conv}
    for i, b in enumerate(vae.encoder.down_blocks):
        mods[f"down_block.{i}"] = b
    hooks = [m.register_forward_hook(hook(seen, k)) for k, m in mods.items()]
    with torch.no_grad():
        mode = vae.encode(lowp(pixels)).latent_dist.mode()
        latents = (mode - lowp(mean)) / lowp(std)
    for hk in hooks:
        hk.remove()
    write_case(ARGS.out, MODEL, "vae_encode", name, weights=weights, inputs={"pixels": pixels},
               outputs={**seen, "mode": mode, "latents": latents}, config=dict(vae.config), upstream=UPSTREAM,
               seed=seed)


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ARGS = ap.parse_args()

    def cases():
        decode_case("small", 1, 1, 3, 5)                        # 48 x 80 pixels, every intermediate
        decode_case("tall", 2, 1, 40, 1, intermediates=False)   # 640 x 16: row strips cut on both sides by the 13-row halo
        encode_case("small", 3, 1, 48, 80)
        encode_case("batch2", 4, 2, 32, 16)
        # other configs and seeds (issue 19): one res block per level, other widths
        decode_case("other_config", 5, 1, 2, 3, decoder_base_dim=2, num_res_blocks=1)
        encode_case("other_config", 6, 1, 32, 48, base_dim=3, num_res_blocks=1)

    record_f16(cases)


if __name__ == "__main__":
    main()
