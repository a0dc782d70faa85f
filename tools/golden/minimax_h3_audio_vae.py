"""Golden vectors for src/models/minimax_h3/vae/audio (diffusers AutoencoderKLMiniMaxH3Audio, decode path only).

Run in the reference lab from the checkout, with diffusers' src/ outside the repository:
  bash ../shared/tools/reflab/run.sh -u diffusers=/opt/upstream/diffusers/src -- \
    python3 /project/tools/golden/minimax_h3_audio_vae.py --out /project/test/fixtures/golden --commit <diffusers commit>
Writes minimax_h3/audio_vae/<case>.safetensors:
  input.latents        normalised latents [2, C, T] (the two stereo channels as two batch items, as the pipeline)
  output.denormalized  latents * latents_std + latents_mean (the pipeline's MiniMaxH3AudioDecodeStep)
  output.dec_in_proj   dec_in_proj(denormalized)          [2, latent_dim, T]
  output.conv_pre      decoder.conv_pre(...)              [2, decoder_dim, T]
  output.ups.<i>       stage i's transposed conv          [2, decoder_dim / 2^(i+1), T * prod(rates[:i+1])]
  output.stage.<i>     stage i's output (mean of its AMP blocks)
  output.activation_post, output.conv_post (before the clamp), output.waveform [2, 1, T * prod(rates)] (clamped)
Weights are the module's state dict under their checkpoint keys (dec_in_proj.*, decoder.*): weight-norm pairs
`weight_g` / `weight_v` as the real checkpoint stores them (g drawn independently of |v| so that folding is
exercised), the resamplers' Kaiser filters as the registered buffers. Encoder-side tensors are left out.
Weights are re-drawn so activations stay O(1) through the stack and the clamp bites on part of the waveform:
v ~ N(0, 1), g ~ U(0.5, 1.5) (a folded conv's rows have norm g: gain ~1 on unit inputs; conv_post's g x 0.15 so
that only part of the waveform is clamped), biases 0.1 N(0, 1),
snake alpha/beta (log values) 0.3 N(0, 1).
"""
import argparse
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import lowp, record_f16, seed_everything, write_case  # noqa: E402

import diffusers  # noqa: E402
from diffusers import AutoencoderKLMiniMaxH3Audio  # noqa: E402

MODEL = "minimax_h3"
COMPONENT = "audio_vae"

# Real structure (BigVGAN with x5 stages of kernel 9 and x2 stages of kernel 4, three AMP blocks of kernels 3/7/11
# at dilations 1/3/5), small widths. The encoder is built by the constructor too; it is kept tiny and unused.
TINY = dict(
    encoder_dim=2, encoder_rates=[2, 5], latent_dim=16, latent_channels=4, num_attention_heads=2,
    decoder_dim=16, decoder_rates=[5, 2], decoder_kernel_sizes=[9, 4],
    resblock_kernel_sizes=[3, 7, 11], resblock_dilation_sizes=[[1, 3, 5], [1, 3, 5], [1, 3, 5]],
    sampling_rate=32000,
)

CASES = {
    # two stages (x5 then x2), 4 latent channels, 9 frames
    "two_stages": dict(seed=8301, frames=9, config={}),
    # three stages (x5, x2, x2), the real 32 latent channels, 6 frames
    "three_stages": dict(seed=8302, frames=6, config=dict(
        latent_channels=32, latent_dim=32, decoder_dim=16, encoder_rates=[4, 5],
        decoder_rates=[5, 2, 2], decoder_kernel_sizes=[9, 4, 4])),
    # other configs and seeds (issue 19): four stages (x5, x5, x2, x2) from width 32, 8 latent channels, 5 frames;
    # and two x5 stages (the real first two) at width 24 with 16 latent channels (latent_dim 32), 7 frames
    "four_stages": dict(seed=8303, frames=5, config=dict(
        latent_channels=8, latent_dim=24, decoder_dim=32, encoder_rates=[4, 5, 5],
        decoder_rates=[5, 5, 2, 2], decoder_kernel_sizes=[9, 9, 4, 4])),
    "two_x5_stages": dict(seed=8304, frames=7, config=dict(
        latent_channels=16, latent_dim=32, decoder_dim=24, encoder_rates=[5, 5],
        decoder_rates=[5, 5], decoder_kernel_sizes=[9, 9])),
}


def randomize(model, gen):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("weight_v"):
                p.copy_(torch.randn(p.shape, generator=gen))
            elif name.endswith("weight_g"):
                scale = 0.15 if name.startswith("decoder.conv_post.") else 1.0  # keep most samples inside the clamp
                p.copy_(scale * (0.5 + torch.rand(p.shape, generator=gen)))
            elif name.endswith(".alpha") or name.endswith(".beta"):
                p.copy_(0.3 * torch.randn(p.shape, generator=gen))
            elif name.endswith("bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))
            elif name.endswith("weight"):
                fan_in = p[0].numel()
                p.copy_(torch.randn(p.shape, generator=gen) / math.sqrt(fan_in))
            else:
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))


def run_case(name, spec, out_dir, upstream):
    gen = seed_everything(spec["seed"])
    cfg = dict(TINY, **spec["config"])
    C = cfg["latent_channels"]
    cfg["latents_mean"] = (0.3 * torch.randn(C, generator=gen, dtype=torch.float64)).tolist()
    cfg["latents_std"] = (1.5 + torch.rand(C, generator=gen, dtype=torch.float64)).tolist()
    vae = AutoencoderKLMiniMaxH3Audio(**cfg).eval()
    randomize(vae, gen)
    weights = {k: v for k, v in vae.state_dict().items() if k.startswith("decoder.") or k.startswith("dec_in_proj.")}
    vae = lowp(vae, inplace=True)  # the f16 / f64 passes: the whole decoder in that dtype (upstream pins it to f32)
    dec = vae.decoder

    outputs = {}

    def keep(key):
        def hook(_m, _i, o):
            outputs[key] = o.detach().clone()
        return hook

    hooks = [vae.dec_in_proj.register_forward_hook(keep("dec_in_proj")),
             dec.conv_pre.register_forward_hook(keep("conv_pre")),
             dec.activation_post.register_forward_hook(keep("activation_post")),
             dec.conv_post.register_forward_hook(keep("conv_post"))]
    for i, up in enumerate(dec.ups):
        hooks.append(up[0].register_forward_hook(keep(f"ups.{i}")))

    latents = torch.randn(2, C, spec["frames"], generator=gen)
    with torch.no_grad():
        mean = torch.tensor(cfg["latents_mean"]).view(1, -1, 1)
        std = torch.tensor(cfg["latents_std"]).view(1, -1, 1)
        denorm = latents * std + mean  # MiniMaxH3AudioDecodeStep
        waveform = vae.decode(lowp(denorm), return_dict=False)[0]
        # each stage's output = the mean of its AMP blocks applied to ups.<i> (the loop of the decoder's forward)
        for i in range(len(dec.ups)):
            x = outputs[f"ups.{i}"]
            acc = sum(dec.resblocks[i * dec.num_kernels + j](x) for j in range(dec.num_kernels))
            outputs[f"stage.{i}"] = acc / dec.num_kernels
    for h in hooks:
        h.remove()
    outputs["denormalized"] = denorm
    outputs["waveform"] = waveform
    clipped = (waveform.abs() >= 1).float().mean().item()
    print(f"{name}: waveform {tuple(waveform.shape)}, |x| peak {outputs['conv_post'].abs().max():.2f}, "
          f"clamped fraction {clipped:.2f}")

    write_case(out_dir, MODEL, COMPONENT, name, weights=weights, inputs={"latents": latents}, outputs=outputs,
               config=cfg, upstream=upstream, seed=spec["seed"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--commit", default="58eb52c0803ea9af3abec60841c2a093bdf1f951")
    args = ap.parse_args()
    upstream = (f"huggingface/diffusers {args.commit} ({diffusers.__version__}, torch {torch.__version__}) "
                "AutoencoderKLMiniMaxH3Audio")
    record_f16(lambda: [run_case(name, spec, args.out, upstream) for name, spec in CASES.items()])
    print(json.dumps(sorted(CASES)))


if __name__ == "__main__":
    main()
