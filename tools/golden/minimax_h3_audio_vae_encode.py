"""Golden vectors for src/models/minimax_h3/vae/audio/encoder.ts (diffusers AutoencoderKLMiniMaxH3Audio.encode: the DAC
encoder, the attention projection `pre_block`, `mean_proj` / `logs_proj`; and the normalisation the modular pipeline's
MiniMaxH3Ref2VAReferenceEncoderStep applies to a reference soundtrack).

Run in the reference lab from the checkout, with diffusers' src/ outside the repository:
  bash ../shared/tools/reflab/run.sh -u diffusers=/opt/upstream/diffusers/src -- \
    python3 /project/tools/golden/minimax_h3_audio_vae_encode.py --out /project/test/fixtures/golden
Writes minimax_h3/audio_vae_encode/<case>.safetensors:
  weight.encoder.*, weight.pre_block.*, weight.mean_proj.*, weight.logs_proj.*   the checkpoint's own keys (weight-norm
                         pairs weight_g / weight_v as released; decoder-side tensors are left out)
  input.waveform         [2, 1, S] the two stereo channels as two batch items of the mono VAE (any S: encode right-pads
                         to a multiple of the hop, 800 samples released)
  output.encoder.block.<i>  [2, C_i, L_i] outputs of the DAC encoder's stages (encoder.block[i]; over 8192 values left out)
  output.encoder         [2, latent_dim, T] the DAC encoder's output
  output.pre_block       [2, T, latent_channels] MiniMaxH3AudioAttnProjection's output (channels-last, as upstream runs it)
  output.attn            [2, T, latent_channels] its causal attention branch alone (heads mean-pooled, adaptive pool, proj)
  output.mean, output.logs  [2, latent_channels, T] latent_dist.mean (= mode()) and the log standard deviation
  output.condition_rows  [2 T, latent_channels] (mode - latents_mean) / latents_std, channel-major rows (all of the left
                         channel's frames, then the right's): the reference encoder step's audio_condition_latents
Tiny configs keep the real structure (DAC blocks of three residual units at dilations 1/3/9 and a strided conv per rate,
the real rates 2, 4, 4, 5, 5 in most cases, a causal attention whose heads are mean-pooled and whose head dimension is
adaptively pooled to the latent channels). Weights: v ~ N(0, 1), g ~ U(0.5, 1.5) (rows of norm g), Snake alpha
~ U(0.5, 1.5), linear weights N(0, 1/fan_in), LayerNorm weights U(0.5, 1.5), biases 0.1 N(0, 1).
"""
import argparse
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import lowp, pass_dtype, record_f16, seed_everything, write_case  # noqa: E402

import diffusers  # noqa: E402
from diffusers import AutoencoderKLMiniMaxH3Audio  # noqa: E402

MODEL, COMPONENT = "minimax_h3", "audio_vae_encode"
MAX_INTERMEDIATE = 8192

TINY = dict(
    encoder_dim=1, encoder_rates=[2, 4, 4, 5, 5], latent_dim=32, latent_channels=8, num_attention_heads=2,
    decoder_dim=8, decoder_rates=[8, 10, 10], decoder_kernel_sizes=[16, 20, 20],  # unused, only built
    resblock_kernel_sizes=[3], resblock_dilation_sizes=[[1]], sampling_rate=32000,
)

CASES = {
    # the real rates (hop 800), 5 latent frames of a whole number of hops; head dim 16 pooled to 8 (windows of 2)
    "five_frames": dict(seed=8401, samples=4000, config={}),
    # a length that is not a whole number of hops: right-padded to 5 frames
    "padded": dict(seed=8402, samples=3321, config={}),
    # 12 frames: the causal attention over more rows, 4 heads of 8 pooled to 8 (identity pool)
    "twelve_frames": dict(seed=8403, samples=9600, config=dict(num_attention_heads=4)),
    # another config and seed: rates 2, 4, 5 (hop 40) from width 2, latent_dim 24 in 2 heads of 12 pooled to 8 latent
    # channels (adaptive pooling with overlapping windows: [0, 2), [1, 3), [3, 5), ...), 20 frames
    "other_config": dict(seed=8404, samples=790, config=dict(
        encoder_dim=2, encoder_rates=[2, 4, 5], latent_dim=24, latent_channels=8, num_attention_heads=2,
        decoder_rates=[5, 8], decoder_kernel_sizes=[9, 16])),
}


def randomize(model, gen):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if not (name.startswith("encoder.") or name.startswith("pre_block.") or name.startswith(("mean_proj.", "logs_proj."))):
                continue
            if name.endswith("weight_v"):
                p.copy_(torch.randn(p.shape, generator=gen))
            elif name.endswith("weight_g") or name.endswith(".alpha") or ("norm" in name and name.endswith("weight")):
                p.copy_(0.5 + torch.rand(p.shape, generator=gen))
            elif p.dim() >= 2:
                p.copy_(torch.randn(p.shape, generator=gen) / math.sqrt(p[0].numel()))
            else:
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))


def run_case(name, spec, out_dir, upstream):
    gen = seed_everything(spec["seed"])
    cfg = dict(TINY, **spec["config"])
    C = cfg["latent_channels"]
    cfg["latents_mean"] = (0.3 * torch.randn(C, generator=gen, dtype=torch.float64)).tolist()
    cfg["latents_std"] = (0.5 + torch.rand(C, generator=gen, dtype=torch.float64)).tolist()
    vae = AutoencoderKLMiniMaxH3Audio(**cfg).eval()
    randomize(vae, gen)
    weights = {k: v for k, v in vae.state_dict().items() if not (k.startswith("decoder.") or k.startswith("dec_in_proj."))}
    waveform = 0.5 * torch.randn(2, 1, spec["samples"], generator=gen).clamp(-2, 2)
    vae = lowp(vae, inplace=True)  # the f16 / f64 passes: the whole encoder in that dtype (upstream pins it to f32)

    outputs = {}

    def keep(key, fn=lambda o: o):
        def hook(_m, _i, o):
            outputs[key] = fn(o).detach().clone()
        return hook

    hooks = [vae.encoder.register_forward_hook(keep("encoder")),
             vae.pre_block.register_forward_hook(keep("pre_block")),
             vae.pre_block.attn.register_forward_hook(keep("attn"))]
    hooks += [b.register_forward_hook(keep(f"encoder.block.{i}")) for i, b in enumerate(vae.encoder.block)]
    with torch.no_grad():
        posterior = vae.encode(lowp(waveform), return_dict=False)[0]
        mode = posterior.mode()
        # MiniMaxH3Ref2VAReferenceEncoderStep: mode, [2, T, C], normalised, channel-major rows
        m = torch.tensor(cfg["latents_mean"]).view(1, 1, -1)
        s = torch.tensor(cfg["latents_std"]).view(1, 1, -1)
        rows = ((mode.float().transpose(1, 2) - m) / s).reshape(-1, C)
    for h in hooks:
        h.remove()
    outputs = {k: v for k, v in outputs.items() if not k.startswith("encoder.block.") or v.numel() <= MAX_INTERMEDIATE}
    outputs.update(mean=mode, logs=posterior.logs, condition_rows=rows)
    if pass_dtype() == torch.float32:
        print(f"{name}: waveform {tuple(waveform.shape)} -> mean {tuple(mode.shape)}, encoder peak "
              f"{outputs['encoder'].abs().max():.2f}, kept {sorted(outputs)}")
    write_case(out_dir, MODEL, COMPONENT, name, weights=weights, inputs={"waveform": waveform}, outputs=outputs,
               config=cfg, upstream=upstream, seed=spec["seed"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--commit", default="58eb52c0803ea9af3abec60841c2a093bdf1f951")
    args = ap.parse_args()
    upstream = (f"huggingface/diffusers {args.commit} ({diffusers.__version__}, torch {torch.__version__}) "
                "AutoencoderKLMiniMaxH3Audio.encode")
    record_f16(lambda: [run_case(name, spec, args.out, upstream) for name, spec in CASES.items()])


if __name__ == "__main__":
    main()
